// Command listen-bench puts a bounded load on the webhook listener: it
// registers a fresh workflow with engine-svc, serves it with the listener
// on loopback, sends signed deliveries at a fixed rate for a fixed time
// (every tenth one a repeat of an earlier delivery), and then proves from
// the run store that every accepted delivery has exactly one run, every
// repeat made none, and none was lost.
//
//	listen-bench [--engine-addr 127.0.0.1:7070] [--rate 200] [--duration 10s]
//	             [--max-concurrent 20]
//
// Handover is counted, not driven: the load measures the listener and the
// engine (verification, dedup, run creation), not a model.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/realm-go/realm/listen-svc/dedup"
	"github.com/realm-go/realm/listen-svc/webhook"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

type counter struct{ n atomic.Int64 }

func (c *counter) Dispatch(context.Context, string) error { c.n.Add(1); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "listen-bench:", err)
		os.Exit(1)
	}
}

const secret = "bench-secret"

func run() error {
	engineAddr := flag.String("engine-addr", client.EngineAddr(), "engine-svc address (env "+client.EngineAddrEnv+")")
	rate := flag.Int("rate", 200, "requests per second")
	dur := flag.Duration("duration", 10*time.Second, "how long to send")
	maxConc := flag.Int("max-concurrent", 20, "the listener's busy limit")
	flag.Parse()

	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	eng, conn, err := client.DialEngine(dctx, *engineAddr)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	id := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	yaml := fmt.Sprintf(`id: %s
name: Webhook bench
version: 1
params_schema: { type: object, required: [n], properties: { n: { type: number } } }
trigger:
  type: webhook
  path: /bench
  auth: { mode: github, secret_from: BENCH_SECRET }
  dedup: { id_from: headers.x-github-delivery, on_missing_id: reject }
  params_map: { n: body.n }
steps:
  answer:
    description: Answer.
    execution: agent
    prompt: "Answer {{ run.params.n }}."
    input_schema: { type: object, required: [answer], properties: { answer: { type: string } } }
`, id)
	src := &realmv1.WorkflowSource{Yaml: []byte(yaml), Path: id + ".yaml"}
	reg, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: src})
	if err != nil || !reg.GetRegistered() {
		return fmt.Errorf("register: %v %s", err, reg.GetReport().GetText())
	}
	d, err := webhook.Declare(src)
	if err != nil {
		return err
	}
	table, problems := webhook.Build([]webhook.Declared{d}, func(string) string { return secret }, true)
	if len(problems) > 0 {
		return problems[0]
	}
	disp := &counter{}
	srv := webhook.New(webhook.Options{Catalog: webhook.Static{T: table}, Engine: eng, Dispatcher: disp,
		Dedup: dedup.NewMemory(nil), MaxConcurrent: *maxConc})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(lis) }()
	defer hs.Close()
	url := "http://" + lis.Addr().String() + "/bench"

	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}, Timeout: 30 * time.Second}
	type outcome struct {
		code    int
		runID   string
		latency time.Duration
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	send := func(n int, delivery string) {
		defer wg.Done()
		body := fmt.Sprintf(`{"n":%d}`, n)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		req.Header.Set("X-GitHub-Delivery", delivery)
		start := time.Now()
		resp, err := httpc.Do(req)
		var o outcome
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			o.code = resp.StatusCode
			var r struct {
				RunID string `json:"run_id"`
			}
			_ = json.Unmarshal(b, &r)
			o.runID = r.RunID
		}
		o.latency = time.Since(start)
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}

	total := int(dur.Seconds() * float64(*rate))
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	began := time.Now()
	for i := 0; i < total; i++ {
		<-tick.C
		wg.Add(1)
		if i%10 == 9 {
			go send(i, fmt.Sprintf("d-%d", i-5)) // a repeat of an earlier delivery
		} else {
			go send(i, fmt.Sprintf("d-%d", i))
		}
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(began)

	codes := map[int]int{}
	var lat []time.Duration
	accepted := map[string]bool{}
	deliveries := map[string]bool{} // distinct delivery ids sent
	for i := 0; i < total; i++ {
		if i%10 != 9 {
			deliveries[fmt.Sprintf("d-%d", i)] = true
		}
	}
	for _, o := range outcomes {
		codes[o.code]++
		lat = append(lat, o.latency)
		if o.code == http.StatusAccepted {
			if accepted[o.runID] {
				return fmt.Errorf("run %s accepted twice", o.runID)
			}
			accepted[o.runID] = true
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }

	stored := map[string]bool{}
	token := ""
	for {
		resp, err := eng.ListRuns(ctx, &realmv1.ListRunsRequest{WorkflowId: id, Limit: 1000, PageToken: token})
		if err != nil {
			return err
		}
		for _, r := range resp.GetRuns() {
			stored[r.GetRunId()] = true
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	lost := 0
	for runID := range accepted {
		if !stored[runID] {
			lost++
		}
	}
	fmt.Printf("workflow %s: %d requests at %d/s for %s (took %s), busy limit %d\n", id, total, *rate, *dur, elapsed.Round(time.Millisecond), *maxConc)
	fmt.Printf("replies: %v\n", codes)
	fmt.Printf("accepted: %d (%.1f/s) for %d distinct deliveries (%d sent twice)\n", len(accepted), float64(len(accepted))/elapsed.Seconds(), len(deliveries), total-len(deliveries))
	fmt.Printf("latency: p50 %s, p99 %s, max %s\n", pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	fmt.Printf("runs in the store: %d; accepted with no run: %d; runs with no accepted request: %d; handovers: %d\n",
		len(stored), lost, len(stored)-(len(accepted)-lost), disp.n.Load())
	busy := codes[http.StatusServiceUnavailable]
	if lost > 0 || len(stored) != len(accepted) || int(disp.n.Load()) != len(accepted) || (busy == 0 && len(accepted) != len(deliveries)) {
		return fmt.Errorf("the store does not hold exactly one run per accepted request")
	}
	fmt.Println("every accepted request has exactly one run; none lost")
	return nil
}
