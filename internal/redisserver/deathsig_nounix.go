//go:build !unix

package redisserver

import "os/exec"

// setDeathSignal has nothing to set outside Unix; the child relies on Stop.
func setDeathSignal(cmd *exec.Cmd) {}
