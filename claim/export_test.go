package claim

// ClaimRoomScriptSource is the source of the claim script of promotions
// with a waiting room, for the tests that run it beside the previous
// release's.
const ClaimRoomScriptSource = claimRoomScriptSource

// ClaimBatchScriptSource is the source of the batch claim script, for the
// test that runs it beside the claim script.
const ClaimBatchScriptSource = claimBatchScriptSource
