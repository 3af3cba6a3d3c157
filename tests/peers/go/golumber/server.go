package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"flag"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	server "github.com/elastic/go-lumber/server/v2"
)

func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "HOST:PORT to listen on (port 0 picks a free one)")
	keepalive := fs.Duration("keepalive", 3*time.Second,
		"go-lumber's keep-alive interval: ACK 0 while a batch waits (0 = none)")
	ackDelay := fs.Duration("ack-delay", 0, "how long the 'pipeline' holds each batch before ACKing it")
	ackBatches := fs.Int("ack-batches", -1, "ACK only the first N batches, never the later ones (-1 = all)")
	timeout := fs.Duration("timeout", 30*time.Second, "go-lumber's network timeout")
	tlsCert := fs.String("tls-cert", "", "speak TLS with this certificate (PEM; with -tls-key), as Logstash's ssl_certificate")
	tlsKey := fs.String("tls-key", "", "the certificate's key (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	rep := newReporter()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *tlsCert != "" {
		// go-lumber's own TLS option only applies to ListenAndServeWith; wrapping the listener
		// here does what it does and keeps the taps on the plaintext side (they see the ACKs).
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return err
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
	// Every byte go-lumber writes is seen, so the test knows each ACK and keep-alive it sent.
	var conns atomic.Int64
	tapped := &tapListener{Listener: l, newTap: func(c net.Conn) *ackTap {
		id := conns.Add(1)
		remote := c.RemoteAddr().String()
		rep.emit("accepted", map[string]any{"conn": id, "remote": remote})
		return &ackTap{onACK: func(v uint32) {
			rep.emit("ack", map[string]any{"conn": id, "remote": remote, "value": v})
		}}
	}}
	// The decoder keeps each event's bytes as received instead of go-lumber's map.
	raw := func(b []byte, v any) error {
		*(v.(*any)) = json.RawMessage(append([]byte{}, b...))
		return nil
	}
	s, err := server.NewWithListener(tapped,
		server.Keepalive(*keepalive), server.Timeout(*timeout), server.JSONDecoder(raw))
	if err != nil {
		return err
	}
	rep.emit("listening", map[string]any{"port": l.Addr().(*net.TCPAddr).Port})

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() { // stdin closing (the test ended) also stops the server
		_, _ = bufio.NewReader(os.Stdin).ReadString(0)
		stop <- syscall.SIGTERM
	}()

	batches := s.ReceiveChan()
	n := 0
	for {
		select {
		case <-stop:
			_ = s.Close()
			rep.emit("closed", map[string]any{})
			return nil
		case b := <-batches:
			n++
			rep.emit("batch", map[string]any{"batch": n, "remote": b.RemoteAddr, "events": b.Events})
			if *ackBatches >= 0 && n > *ackBatches {
				continue // never ACKed: the client waits (or times out without keep-alives)
			}
			go func(n int) { // the ACK loop handles batches in order; the delay is the "pipeline"
				time.Sleep(*ackDelay)
				rep.emit("release", map[string]any{"batch": n})
				b.ACK()
			}(n)
		}
	}
}
