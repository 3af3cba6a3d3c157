package main

import (
	"encoding/binary"
	"net"
	"sync"
)

// ackTap sees the bytes of one direction of a connection and reports every complete 6-byte
// Lumberjack v2 ACK frame in it ('2' 'A' u32), however the bytes were split by reads or writes.
type ackTap struct {
	mu     sync.Mutex
	buf    []byte
	values []uint32
	onACK  func(value uint32)
}

func (t *ackTap) add(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	for len(t.buf) >= 6 {
		v := binary.BigEndian.Uint32(t.buf[2:6])
		if t.buf[0] != '2' || t.buf[1] != 'A' {
			v = ^uint32(0) // not an ACK frame: reported as 0xffffffff so a test fails loudly
		}
		t.buf = t.buf[6:]
		t.values = append(t.values, v)
		if t.onACK != nil {
			t.onACK(v)
		}
	}
}

func (t *ackTap) acks() []uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]uint32{}, t.values...)
}

// readTap records what the peer read from the connection (the client's view of the ACKs).
type readTap struct {
	net.Conn
	tap *ackTap
}

func (c *readTap) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.tap.add(p[:n])
	return n, err
}

// writeTap records what the peer wrote (the server's ACKs and keep-alives, as go-lumber wrote them).
type writeTap struct {
	net.Conn
	tap *ackTap
}

func (c *writeTap) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.tap.add(p[:n])
	return n, err
}

// tapListener wraps every accepted connection in a writeTap made by newTap.
type tapListener struct {
	net.Listener
	newTap func(conn net.Conn) *ackTap
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeTap{Conn: c, tap: l.newTap(c)}, nil
}
