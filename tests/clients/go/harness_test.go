package clientsgo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every broker these tests start gets these settings. In KAFKA_BOOTSTRAP mode the external broker should be
// started with the same ones (run.sh's header shows how); without the heartbeat ones the KIP-848 test is only
// slower (Kafka's default consumer heartbeat interval is 5 s).
var brokerSets = []string{
	"group.initial.rebalance.delay.ms=0",
	"group.consumer.heartbeat.interval.ms=1000",
	"group.consumer.min.heartbeat.interval.ms=1000",
}

const (
	startTimeout = 30 * time.Second
	stopTimeout  = 20 * time.Second
)

type broker struct {
	addr     string
	external bool
	logPath  string

	cmd    *exec.Cmd
	waited chan struct{}
	err    error // from cmd.Wait, valid once waited is closed
}

func repoRoot(t *testing.T) string {
	t.Helper()
	// The package directory is <repo>/tests/clients/go.
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatalf("repo root: %v", err)
	}
	return root
}

func binaryPath(t *testing.T) string {
	if p := os.Getenv("RINGLEADER_BIN"); p != "" {
		return p
	}
	return filepath.Join(repoRoot(t), "target", "release", "ringleader")
}

// freePort picks a free loopback port below the ephemeral range, so that no client's outgoing connection takes it
// between the probe and the broker's bind.
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 200; i++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(12000))
		port := 20000 + int(n.Int64())
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lineWatcher copies the broker's output to its log file and signals once a line contains the marker.
type lineWatcher struct {
	mu      sync.Mutex
	out     io.Writer
	partial []byte
	marker  string
	seen    chan struct{}
	once    sync.Once
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.out.Write(p); err != nil {
		return 0, err
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if strings.Contains(string(w.partial[:i]), w.marker) {
			w.once.Do(func() { close(w.seen) })
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// startBroker starts `ringleader serve` for this test (or returns the KAFKA_BOOTSTRAP broker) and registers its
// shutdown: SIGTERM, then the process must exit 0 within stopTimeout.
func startBroker(t *testing.T) *broker {
	t.Helper()
	if addr := os.Getenv("KAFKA_BOOTSTRAP"); addr != "" {
		t.Logf("using the external broker at %s (KAFKA_BOOTSTRAP)", addr)
		return &broker{addr: addr, external: true}
	}
	bin := binaryPath(t)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("ringleader binary %s: %v (set RINGLEADER_BIN)", bin, err)
	}
	tmp := t.TempDir()
	logDir := tmp
	if d := os.Getenv("RINGLEADER_LOG_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("RINGLEADER_LOG_DIR: %v", err)
		}
		logDir = d
	}
	logPath := filepath.Join(logDir, strings.ReplaceAll(t.Name(), "/", "_")+".ringleader.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("log file: %v", err)
	}

	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(tmp, "data")}
	for _, kv := range brokerSets {
		args = append(args, "--set", kv)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	w := &lineWatcher{out: logFile, marker: "listening on " + addr, seen: make(chan struct{})}
	cmd.Stdout = w
	cmd.Stderr = w
	// Kill the broker if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	b := &broker{addr: addr, logPath: logPath, cmd: cmd, waited: make(chan struct{})}
	go func() {
		b.err = cmd.Wait()
		logFile.Close()
		close(b.waited)
	}()
	t.Cleanup(func() { b.stop(t) })

	select {
	case <-w.seen:
	case <-b.waited:
		t.Fatalf("ringleader exited during start-up (%v); log:\n%s", b.err, tailFile(logPath, 40))
	case <-time.After(startTimeout):
		t.Fatalf("ringleader did not log 'listening on %s' within %v; log:\n%s", addr, startTimeout, tailFile(logPath, 40))
	}
	t.Logf("ringleader pid %d listening on %s (log %s)", cmd.Process.Pid, addr, logPath)
	return b
}

func (b *broker) stop(t *testing.T) {
	if b.external || b.cmd == nil {
		return
	}
	select {
	case <-b.waited:
		t.Errorf("ringleader exited before the test ended: %v", b.err)
	default:
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.waited:
			if b.err != nil {
				t.Errorf("ringleader did not exit cleanly on SIGTERM: %v", b.err)
			}
		case <-time.After(stopTimeout):
			_ = b.cmd.Process.Kill()
			<-b.waited
			t.Errorf("ringleader did not exit within %v of SIGTERM", stopTimeout)
		}
	}
	if t.Failed() {
		t.Logf("ringleader log tail (%s):\n%s", b.logPath, tailFile(b.logPath, 60))
	}
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// uniqueName gives names that differ per run, so that tests against a long-lived external broker do not collide.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// clientLog collects one test's franz-go logs in a file, printed when the test fails.
func clientLog(t *testing.T) io.Writer {
	t.Helper()
	dir := t.TempDir()
	if d := os.Getenv("RINGLEADER_LOG_DIR"); d != "" {
		dir = d
	}
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".franz-go.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("client log: %v", err)
	}
	sw := &syncWriter{w: f}
	t.Cleanup(func() {
		sw.mu.Lock()
		f.Close()
		sw.closed = true
		sw.mu.Unlock()
		if t.Failed() {
			t.Logf("franz-go log tail (%s):\n%s", path, tailFile(path, 40))
		}
	})
	return sw
}

type syncWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	return s.w.Write(p)
}

// newClient makes a kgo client for the broker; it is closed when the test ends (closing twice is harmless).
func newClient(t *testing.T, b *broker, logw io.Writer, clientID string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(b.addr),
		kgo.ClientID(clientID),
		kgo.WithLogger(kgo.BasicLogger(logw, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") + clientID + " " })),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(30 * time.Second),
		kgo.MetadataMinAge(200 * time.Millisecond),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t *testing.T, b *broker, logw io.Writer) *kadm.Client {
	t.Helper()
	adm := kadm.NewClient(newClient(t, b, logw, "go-admin"))
	adm.SetTimeoutMillis(15000)
	return adm
}

// waitFor polls cond until it reports true or the timeout passes; cond's string says what it saw last.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createTopic creates a topic and waits until its metadata shows every partition with a leader.
func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopic %s: %v (%s)", topic, resp.Err, resp.ErrMessage)
	}
	waitFor(t, 30*time.Second, "topic "+topic+" metadata", func() (bool, string) {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		d, ok := td[topic]
		if !ok || d.Err != nil {
			return false, fmt.Sprintf("%+v", d)
		}
		if len(d.Partitions) != int(partitions) {
			return false, fmt.Sprintf("%d partitions", len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false, fmt.Sprintf("partition %d leader %d err %v", p.Partition, p.Leader, p.Err)
			}
		}
		return true, ""
	})
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
