package redisserver

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the child when the forking thread
// (and so, with spawn, the parent process) dies. The child gets its own
// process group so a terminal's Ctrl-C does not stop Redis while the parent
// still shuts down gracefully with it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
