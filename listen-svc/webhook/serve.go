package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/realm-go/realm/pkg/metrics"
)

// Serve answers HTTP on lis until a signal arrives on stop, then logs
// `listen: shutting down {"reason":"SIGINT"}` (or SIGTERM), stops accepting
// connections and lets requests in flight finish (at most grace).
func Serve(lis net.Listener, h http.Handler, stop <-chan os.Signal, log *Logger, grace time.Duration) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case sig := <-stop:
		log.Info("listen: shutting down", KV{"reason", signalName(sig)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		_ = hs.Close()
	}
	return nil
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	if s == nil {
		return "stop"
	}
	return s.String()
}

// IsLoopback reports whether host is a loopback name (127.*, ::1,
// localhost), for the plaintext warning (listen spec §3 step 8).
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Routes puts the webhook server behind the probe and metrics routes:
// GET /healthz and GET /metrics answer here, every other request (any
// method, any path) reaches srv, counted by response code.
func Routes(srv http.Handler, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", metrics.Handler(reg))
	mux.Handle("/", metrics.HTTP(reg, "webhook", srv))
	return mux
}
