//go:build unix && !linux

package redisserver

import (
	"os/exec"
	"syscall"
)

// setDeathSignal cannot ask for a death signal where the OS has none; the
// child then relies on Stop, and on the lock for a restarted parent. It still
// gets its own process group, as on Linux.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
