package claim

import (
	"context"
	"fmt"
	"strconv"
)

// MaxBatch is the most claims one ClaimBatch call takes: a call of 64
// accepted claims holds Redis for about 0.2 ms.
const MaxBatch = 64

// claimBatchScriptSource is the Lua source of claimBatchScript: the claim
// script's reads of the meta hash, the rank counter and the time once per
// call, then, for each claim, the claim script's checks and take in a
// function whose ARGV is that claim's (the very text of claimScriptSource,
// see leanHead). The loop keeps what the claims before wrote and the reads
// cannot see: the rank counter one higher after each accepted claim, and
// the promotion rebuilding after a claim that found Redis lost writes.
const claimBatchScriptSource = "-- dibs:claim_batch v1\n" + leanMeta + leanSeq + leanTime +
	"local function claim(ARGV)\n" + leanMode + leanFence + leanWindow + leanTake + leanAccept + `end
local out, id = {}, ARGV[1]
for i = 2, #ARGV, 3 do
  local r = claim({ARGV[i], ARGV[i + 1], id, ARGV[i + 2]})
  if r == 'lost' then m[8] = '1' elseif type(r) == 'table' and r[3] == 0 then seq = seq + 1 end
  out[#out + 1] = r
end
return out
`

// claimBatchScript admits several first-come claims of one promotion, in
// order, each as claimScript would admit it alone right after the one
// before: the same answers, the same keys written, ranks in the order of
// ARGV.
//
// KEYS: as claimScript.
// ARGV: promotion id, then for each claim its user id, Idempotency-Key (""
// for none) and fence (see claimScript).
//
// Returns one reply per claim, in order, each claimScript's reply for it.
// The claims of one call see one Redis TIME: a call runs as if its claims
// arrived at one instant, so their window checks and their entries' at
// fields agree.
var claimBatchScript = newScript(claimBatchScriptSource)

// Ask is one claim of a ClaimBatch call.
type Ask struct {
	// UserID is the claiming user.
	UserID string
	// IdemKey is the client's Idempotency-Key, or "".
	IdemKey string
	// Fence is the highest rank the caller knows to be taken (see
	// Gate.ClaimFenced); 0 for none.
	Fence int64
}

// Answer is one claim's answer of a ClaimBatch call: the accepted claim,
// or Err, one of the sentinel outcomes Gate.ClaimFenced returns.
type Answer struct {
	Result Result
	Err    error
}

// ClaimBatch admits the claims of asks in promotion id in one script call,
// in order, each exactly as ClaimFenced would admit it alone right after
// the one before it (so two claims of one user in one call meet the
// per-user limit, and a claim after the last unit answers ErrSoldOut). It
// returns one Answer per ask, in order. An error means the call itself
// failed (Redis's error; the outcome of every claim is then unknown if it
// was a timeout); at most MaxBatch asks per call.
func (g *Gate) ClaimBatch(ctx context.Context, id string, asks []Ask) ([]Answer, error) {
	switch {
	case len(asks) == 0:
		return nil, nil
	case len(asks) > MaxBatch:
		return nil, fmt.Errorf("claim batch of %d in %s: at most %d claims per call", len(asks), id, MaxBatch)
	}
	args := make([]string, 1, 1+3*len(asks))
	args[0] = id
	for _, a := range asks {
		args = append(args, a.UserID, a.IdemKey, strconv.FormatInt(a.Fence, 10))
	}
	vals, err := claimBatchScript.Exec(ctx, g.client, g.Keys(id).all(), args).ToArray()
	if err == nil && len(vals) != len(asks) {
		err = fmt.Errorf("%d replies", len(vals))
	}
	if err != nil {
		return nil, fmt.Errorf("claim batch of %d in %s: %w", len(asks), id, err)
	}
	out := make([]Answer, len(asks))
	for i := range vals {
		out[i].Result, out[i].Err = decodeClaim(id, asks[i].UserID, &vals[i])
	}
	return out, nil
}
