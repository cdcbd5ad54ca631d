package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/mongomirror"
)

// startMirror mirrors the controller into MongoDB in the background until
// the returned stop is called. Only a URI the driver refuses stops
// sparkd: an unreachable server is retried by the mirror, never awaited
// by admission. The URI is never logged.
func startMirror(ctx context.Context, c *spark.Controller, uri string, names map[string]string, log *slog.Logger) (stop func(), err error) {
	client, err := mongomirror.Connect(uri)
	if err != nil {
		return nil, err
	}
	m := mongomirror.New(c, client, mongomirror.Options{Names: names, Log: log})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	log.Info("sparkd.mirror", "database", "gpugate", "every", "15s")
	return func() {
		cancel()
		<-done
		shut, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelShut()
		client.Disconnect(shut)
	}, nil
}
