package redisserver

import (
	"os/exec"
	"runtime"
	"syscall"
)

// child is one redis-server process and the goroutine that waits for it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // cmd.Wait's result; written before done is closed
}

// spawn starts cmd from a goroutine locked to its OS thread, which then
// waits for the process. The parent death signal (see setDeathSignal) is
// tied to the thread that forked the child, so that thread must live exactly
// as long as the child: the goroutine keeps it until Wait returns.
func spawn(cmd *exec.Cmd) (*child, error) {
	c := &child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(c.done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-c.done
		return nil, err
	}
	return c, nil
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (c *child) kill() {
	if !c.exited() {
		// An error means the process already exited; done is closed soon.
		_ = c.cmd.Process.Kill()
	}
	<-c.done
}

func (c *child) signalTerm() error {
	return c.cmd.Process.Signal(syscall.SIGTERM)
}
