// Command golumber runs elastic/go-lumber's v2 client or server for wirelog's peer tests.
//
//	golumber client -addr HOST:PORT [-mode sync|async] [-level N] [-batches N] [-batch N] ...
//	golumber server [-addr HOST:PORT] [-keepalive D] [-ack-delay D] [-ack-batches N]
//
// Both print JSON lines on stdout saying what went over the wire from their side (the exact event
// bytes the library framed, the ACK frames written or read), so a test can compare a capture's
// decoding with what the peer really did.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: golumber client|server [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "client":
		err = runClient(os.Args[2:])
	case "server":
		err = runServer(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (client or server)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "golumber:", err)
		os.Exit(1)
	}
}

// reporter writes one JSON object per line; callbacks of the async client and the server's
// connections report from several goroutines.
type reporter struct {
	mu    sync.Mutex
	enc   *json.Encoder
	start time.Time
}

func newReporter() *reporter {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return &reporter{enc: enc, start: time.Now()}
}

// emit adds "kind" and "ms" (milliseconds since start) to fields and prints them.
func (r *reporter) emit(kind string, fields map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fields["kind"] = kind
	fields["ms"] = time.Since(r.start).Milliseconds()
	if err := r.enc.Encode(fields); err != nil {
		fmt.Fprintln(os.Stderr, "golumber: stdout:", err)
		os.Exit(1)
	}
}

func errText(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}
