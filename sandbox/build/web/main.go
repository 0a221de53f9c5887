// Command web answers every HTTP request with 200 and the name of the host
// (the pod) it runs on: the sandbox's stand-in for the nginx test pods of
// the Cilium runbook, whose checks only ask for a 200 from each pod's
// address on port 80.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("listen", ":80", "address to serve on")
	flag.Parse()
	host, _ := os.Hostname()
	srv := &http.Server{
		Addr: *addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "web: %s\n", host)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	// A pod is stopped with SIGTERM: close at once rather than wait out
	// the grace period.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Close()
	}()
	log.Printf("web: serving on %s", *addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
