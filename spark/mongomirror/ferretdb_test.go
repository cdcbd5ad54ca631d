package mongomirror

import (
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gpugate/gpugate/internal/ferretdbtest"
)

// The tests run against FerretDB (a MongoDB-wire-protocol server) on
// loopback; see internal/ferretdbtest.

func TestMain(m *testing.M) {
	code := m.Run()
	ferretdbtest.Stop()
	os.Exit(code)
}

func ferretURI(t *testing.T) string { return ferretdbtest.URI(t) }

// testClient connects to uri failing fast, as a test wants: an outage
// shows within half a second.
func testClient(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(300 * time.Millisecond).
		SetConnectTimeout(300 * time.Millisecond).SetHeartbeatInterval(500 * time.Millisecond).SetRetryWrites(false).SetRetryReads(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(t.Context()) })
	return c
}

// proxy stands between the driver and the server on loopback: cut, it
// drops every connection and refuses new ones (an outage); held, it
// stops forwarding what the driver sends (a server that does not
// answer) until released.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	gate   chan struct{} // closed while traffic flows
	held   chan struct{} // receives when a request is held
	conns  []net.Conn
}

func newProxy(t *testing.T, uri string) (*proxy, string) {
	t.Helper()
	target := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, gate: make(chan struct{}), held: make(chan struct{}, 1)}
	close(p.gate)
	t.Cleanup(func() { p.Release(); ln.Close(); p.Cut() })
	go p.serve()
	return p, "mongodb://" + ln.Addr().String() + "/?directConnection=true"
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns = append(p.conns, c)
		}
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, s)
		p.mu.Unlock()
		go p.forward(c, s)
		go io.Copy(c, s)
	}
}

// forward copies what the driver sends, waiting at the gate.
func (p *proxy) forward(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			select {
			case <-gate:
			default:
				select {
				case p.held <- struct{}{}:
				default:
				}
				<-gate
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			s.Close()
			return
		}
	}
}

// Cut drops every connection and refuses new ones until Restore.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore lets connections through again.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Hold stops forwarding what the driver sends.
func (p *proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Release forwards again.
func (p *proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}
