// grpcecho: the gRPC echo server of ../shared/bench/peers/targets/grpcecho (every method of
// every service answers by echoing the request message back, after an optional delay), plus
// its own timing of each call, so that bench/grpc.sh can compare a tool's latency with what
// the server itself spent on the same calls in the same run.
//
// A call's own time runs from its arrival to its answer:
//   - arrival: the transport's reader goroutine has read the request's HEADERS frame off the
//     connection and creates the stream (grpc.InTapHandle runs there, before the call's own
//     goroutine is started);
//   - answer: the status (trailers) is handed to the transport's writer, after the response
//     message (stats.End, reported once WriteStatus returns).
//
// What a client measures beyond that is its own work and the loopback's: writing the request,
// the kernel, the reader goroutine waking up; the writer goroutine's socket write, the kernel,
// the client reading the answer.
//
//	GET /__stats  -> JSON: {"calls": N, "timed": N, "p50_ms", "p90_ms", "p99_ms", "max_ms"}
//	GET /__reset  -> clears the counters and the timings
//
// Timings are kept only with -timing (a slice of every call's duration, sorted when asked:
// at the open model's 2,000 calls/s, 20,000 values per 10 s run); without it the server is
// the shared one's, call for call.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"
)

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	b := v.(*[]byte)
	*b = append((*b)[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var calls atomic.Int64

type arrivalKey struct{}

// timings: every timed call's duration, arrival to answer.
type timings struct {
	mu   sync.Mutex
	durs []time.Duration
}

func (t *timings) add(d time.Duration) {
	t.mu.Lock()
	t.durs = append(t.durs, d)
	t.mu.Unlock()
}

// timer is the stats handler: it reads the arrival stamped by the tap and records the call's
// duration when it ends.
type timer struct{ t *timings }

func (timer) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (timer) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (timer) HandleConn(context.Context, stats.ConnStats)                       {}
func (h timer) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || end.Error != nil {
		return
	}
	if arrived, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		h.t.add(end.EndTime.Sub(arrived))
	}
}

// pct: the p-th percentile of sorted durations, ms (nearest rank, as delayserver.go).
func pct(sorted []time.Duration, p float64) float64 {
	i := int(p/100*float64(len(sorted)-1) + 0.5)
	return float64(sorted[i]) / 1e6
}

func main() {
	addr := flag.String("listen", "127.0.0.1:18095", "gRPC listen address")
	statsAddr := flag.String("stats", "127.0.0.1:18096", "HTTP stats address")
	delay := flag.Duration("delay", 0, "delay before answering")
	timing := flag.Bool("timing", false, "time every call (arrival to answer) for /__stats")
	flag.Parse()
	handler := func(_ any, stream grpc.ServerStream) error {
		var b []byte
		if err := stream.RecvMsg(&b); err != nil {
			return err
		}
		if *delay > 0 {
			time.Sleep(*delay)
		}
		calls.Add(1)
		return stream.SendMsg(&b)
	}
	tm := &timings{durs: make([]time.Duration, 0, 1<<16)}
	go func() {
		http.HandleFunc("/__stats", func(w http.ResponseWriter, _ *http.Request) {
			tm.mu.Lock()
			d := append([]time.Duration(nil), tm.durs...)
			tm.mu.Unlock()
			out := map[string]any{"calls": calls.Load(), "timed": len(d)}
			if len(d) > 0 {
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				out["p50_ms"], out["p90_ms"], out["p99_ms"] = pct(d, 50), pct(d, 90), pct(d, 99)
				out["max_ms"] = float64(d[len(d)-1]) / 1e6
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
		})
		http.HandleFunc("/__reset", func(w http.ResponseWriter, _ *http.Request) {
			calls.Store(0)
			tm.mu.Lock()
			tm.durs = tm.durs[:0]
			tm.mu.Unlock()
		})
		log.Fatal(http.ListenAndServe(*statsAddr, nil))
	}()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(handler)}
	if *timing {
		stamp := func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			return context.WithValue(ctx, arrivalKey{}, time.Now()), nil
		}
		opts = append(opts, grpc.InTapHandle(stamp), grpc.StatsHandler(timer{tm}))
	}
	s := grpc.NewServer(opts...)
	log.Fatal(s.Serve(lis))
}
