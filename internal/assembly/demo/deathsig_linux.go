package demo

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel send the local server SIGTERM if
// this process dies first (even by kill -9), so a demo never leaves a server
// and its redis-server behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
