package gitremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/net/proxy"
)

// proxyScheme names the proxy "URL" that carries an ssh ProxyCommand through go-git's
// dialer (which takes a proxy URL, not a command): the connection is handed to the command
// (for ProxyJump, the system ssh), as OpenSSH does.
const proxyScheme = "memd-proxycommand"

func init() {
	proxy.RegisterDialerType(proxyScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		cmd := u.Query().Get("cmd")
		if cmd == "" {
			return nil, errors.New("ssh ProxyCommand: empty")
		}
		return commandDialer{cmd: cmd}, nil
	})
}

func proxyCommandURL(cmd string) string {
	return (&url.URL{Scheme: proxyScheme, Host: "proxy", RawQuery: url.Values{"cmd": {cmd}}.Encode()}).String()
}

// commandDialer runs the ProxyCommand under sh and speaks ssh over its stdin and stdout.
type commandDialer struct{ cmd string }

func (d commandDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// DialContext starts the command. ctx only bounds the start: go-git cancels its dial
// context as soon as the connection exists, and the connection must outlive it.
func (d commandDialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := exec.Command("/bin/sh", "-c", d.cmd)
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &cappedBuffer{max: 2048}
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("ssh ProxyCommand %q: %w", d.cmd, err)
	}
	return &cmdConn{cmd: c, in: stdin, out: stdout, stderr: stderr, addr: addr}, nil
}

// cmdConn is a net.Conn over a process's pipes.
type cmdConn struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	stderr *cappedBuffer
	addr   string
	once   sync.Once
}

func (c *cmdConn) Read(p []byte) (int, error) {
	n, err := c.out.Read(p)
	if err == io.EOF && n == 0 {
		// Say why the proxy ended (its stderr), e.g. "channel 0: open failed".
		if msg := c.stderr.String(); msg != "" {
			return 0, fmt.Errorf("ssh ProxyCommand ended: %s: %w", RedactURL(msg), io.EOF)
		}
	}
	return n, err
}

func (c *cmdConn) Write(p []byte) (int, error) { return c.in.Write(p) }

func (c *cmdConn) Close() error {
	c.once.Do(func() {
		_ = c.in.Close()
		if c.cmd.Process != nil {
			_ = c.cmd.Process.Kill()
		}
		_ = c.cmd.Wait()
	})
	return nil
}

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

func (c *cmdConn) LocalAddr() net.Addr              { return pipeAddr("proxycommand") }
func (c *cmdConn) RemoteAddr() net.Addr             { return pipeAddr(c.addr) }
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }
func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(p)
	return len(p), nil
}
func (c *cappedBuffer) String() string { c.mu.Lock(); defer c.mu.Unlock(); return string(c.b) }
func (c *cappedBuffer) add(p []byte)   { c.b = append(c.b, p[:min(len(p), max(0, c.max-len(c.b)))]...) }

// cappedBuffer keeps the first max bytes written to it (a remote's or a command's
// messages), safe for concurrent writes.
type cappedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}
