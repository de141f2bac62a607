//go:build !linux

package demo

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal; Stop still ends the server on every normal exit.
func setParentDeathSignal(*exec.Cmd) {}
