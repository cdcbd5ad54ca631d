package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/mongomirror"
)

// startMirror mirrors the controller into MongoDB in the background until
// the returned stop is called. Only a URI the driver refuses stops
// sparkd: a server out of reach, even one whose DNS name does not resolve
// yet, is retried (every 30 s until it connects), never awaited by
// admission. The URI is never logged.
func startMirror(ctx context.Context, c *spark.Controller, uri string, names map[string]string, log *slog.Logger) (stop func(), err error) {
	client, err := mongomirror.Connect(uri)
	if err != nil && !errors.Is(err, mongomirror.ErrUnreachable) {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var connected *mongo.Client
	go func() {
		defer close(done)
		for client == nil {
			log.Warn("sparkd.mirror_unreachable", "err", err, "retry_in", "30s")
			t := time.NewTimer(30 * time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			client, err = mongomirror.Connect(uri)
		}
		connected = client
		mongomirror.New(c, client, mongomirror.Options{Names: names, Log: log}).Run(ctx)
	}()
	log.Info("sparkd.mirror", "database", "gpugate", "every", "15s")
	return func() {
		cancel()
		<-done
		if connected != nil {
			shut, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancelShut()
			connected.Disconnect(shut)
		}
	}, nil
}
