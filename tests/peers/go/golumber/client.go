package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	client "github.com/elastic/go-lumber/client/v2"
)

type clientOpts struct {
	addr     string
	mode     string
	level    int
	batches  int
	batch    int
	size     int
	events   string
	inflight int
	timeout  time.Duration
	keylog   string
}

func runClient(args []string) error {
	var o clientOpts
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "", "server HOST:PORT")
	fs.StringVar(&o.mode, "mode", "sync", "sync (SyncClient) or async (AsyncClient, pipelined windows)")
	fs.IntVar(&o.level, "level", 3, "zlib compression level, 0 = plain J frames")
	fs.IntVar(&o.batches, "batches", 2, "windows to send (generated events)")
	fs.IntVar(&o.batch, "batch", 3, "events per window")
	fs.IntVar(&o.size, "size", 0, "extra pseudo-random characters in each generated message")
	fs.StringVar(&o.events, "events", "", "JSON file holding an array of event objects to send instead")
	fs.IntVar(&o.inflight, "inflight", 2, "async: windows awaiting an ACK while the next is sent")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "network timeout (also the wait for each ACK)")
	fs.StringVar(&o.keylog, "tls-keylog", "", "speak TLS (server certificate not verified) and append its NSS key log here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.addr == "" {
		return fmt.Errorf("client: -addr is required")
	}
	batches, err := o.load()
	if err != nil {
		return err
	}

	rep := newReporter()
	tap := &ackTap{}
	// The encoder is go-lumber's default (json.Marshal); wrapping it records the exact bytes framed.
	var encoded [][]byte
	encoder := func(v any) ([]byte, error) {
		b, err := json.Marshal(v)
		encoded = append(encoded, b)
		return b, err
	}
	dial := func(network, address string) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, o.timeout)
		if err != nil {
			return nil, err
		}
		rep.emit("connected", map[string]any{"local": c.LocalAddr().String()})
		if o.keylog == "" {
			return &readTap{Conn: c, tap: tap}, nil
		}
		// crypto/tls's KeyLogWriter: the key log Filebeat and every Go shipper can write.
		keys, err := os.OpenFile(o.keylog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		conf := &tls.Config{InsecureSkipVerify: true, KeyLogWriter: keys, ServerName: "logstash"}
		return &readTap{Conn: tls.Client(c, conf), tap: tap}, nil
	}
	opts := []client.Option{
		client.CompressionLevel(o.level),
		client.Timeout(o.timeout),
		client.JSONEncoder(encoder),
	}
	// sent reports the events of window b as the library encoded them (seq = index + 1 per window).
	sent := func(b int) {
		for i, raw := range encoded {
			rep.emit("event", map[string]any{"batch": b, "seq": i + 1, "doc": json.RawMessage(raw)})
		}
		encoded = nil
	}
	result := func(b, count int, acked uint32, err error) {
		rep.emit("result", map[string]any{"batch": b, "count": count, "acked": acked, "error": errText(err)})
	}

	s := session{dial: dial, addr: o.addr, opts: opts, sent: sent, result: result}
	switch o.mode {
	case "sync":
		err = s.sendSync(batches)
	case "async":
		err = s.sendAsync(o.inflight, batches)
	default:
		err = fmt.Errorf("client: -mode must be sync or async, not %q", o.mode)
	}
	if err != nil {
		return err
	}
	rep.emit("done", map[string]any{"acks": tap.acks()})
	return nil
}

// session is one connection's worth of sending: how to dial, and where to report.
type session struct {
	dial   func(network, address string) (net.Conn, error)
	addr   string
	opts   []client.Option
	sent   func(batch int)                                 // after a window was written
	result func(batch, count int, acked uint32, err error) // once its ACK (or failure) is known
}

// sendSync sends each window and waits for its ACK; the first failure ends the connection.
func (s session) sendSync(batches [][]any) error {
	c, err := client.SyncDialWith(s.dial, s.addr, s.opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	for i, b := range batches {
		n, err := c.Send(b)
		s.sent(i + 1)
		s.result(i+1, len(b), uint32(n), err)
		if err != nil {
			return nil
		}
	}
	return nil
}

// sendAsync pipelines the windows (up to inflight unacknowledged) and reports each ACK as its
// callback runs; after a failure the remaining callbacks get the error when the client closes.
func (s session) sendAsync(inflight int, batches [][]any) error {
	c, err := client.AsyncDialWith(s.dial, s.addr, inflight, s.opts...)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	failed := make(chan struct{})
	var once sync.Once
	for i, b := range batches {
		i, count := i+1, len(b)
		wg.Add(1)
		err := c.Send(func(seq uint32, err error) {
			defer wg.Done()
			s.result(i, count, seq, err)
			if err != nil {
				once.Do(func() { close(failed) })
			}
		}, b)
		s.sent(i)
		if err != nil {
			break
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-failed:
	}
	// Close unblocks the ACK loop after a failure, which then fails the remaining callbacks; its
	// own error repeats that failure, already reported by the callbacks.
	_ = c.Close()
	<-done
	return nil
}

// load returns the windows to send: the -events file cut into -batch sized windows, or
// -batches × -batch generated Filebeat-shaped events.
func (o *clientOpts) load() ([][]any, error) {
	var all []any
	if o.events != "" {
		f, err := os.Open(o.events)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		dec := json.NewDecoder(f)
		dec.UseNumber() // numbers go out as they came in
		if err := dec.Decode(&all); err != nil {
			return nil, fmt.Errorf("%s: %w", o.events, err)
		}
	} else {
		for n := 0; n < o.batches*o.batch; n++ {
			all = append(all, generated(n, o.size))
		}
	}
	if o.batch < 1 {
		return nil, fmt.Errorf("client: -batch must be at least 1")
	}
	var out [][]any
	for len(all) > 0 {
		k := min(o.batch, len(all))
		out = append(out, all[:k])
		all = all[k:]
	}
	return out, nil
}

// generated is event n: a Filebeat-like document whose message has characters json.Marshal
// escapes (<, >, &, quotes), non-ASCII text, and `size` pseudo-random hex digits (xorshift seeded
// by n: deterministic, and poorly compressible, so big windows span several TCP segments).
func generated(n, size int) map[string]any {
	var pad strings.Builder
	x := uint64(n)*0x9E3779B97F4A7C15 + 1
	for pad.Len() < size {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		fmt.Fprintf(&pad, "%016x", x)
	}
	ts := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Add(time.Duration(n) * 1500 * time.Millisecond)
	return map[string]any{
		"@metadata":  map[string]any{"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
		"@timestamp": ts.Format("2006-01-02T15:04:05.000Z"),
		"message":    fmt.Sprintf("GET /item/%d <ok> & \"fine\" – ünïcode ✓ %s", n, pad.String()[:size]),
		"n":          n,
		"log":        map[string]any{"offset": n * 128, "file": map[string]any{"path": "/var/log/app.log"}},
		"host":       map[string]any{"name": "go-peer"},
	}
}
