package mongomirror

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gpugate/gpugate/internal/retry"
	"github.com/gpugate/gpugate/spark"
)

// Start mirrors the controller into the MongoDB at uri in the background
// until the returned stop is called (it waits for the last pass and
// disconnects). Only a URI the driver refuses is an error (ErrBadURI): a
// server out of reach, even one whose DNS name does not resolve yet, is
// retried every 30 s until it connects, never awaited by admission. The
// URI is never logged.
func Start(ctx context.Context, c *spark.Controller, uri string, opts Options) (stop func(), err error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := Connect(uri)
	if err != nil && !errors.Is(err, ErrUnreachable) {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var connected *mongo.Client
	go func() {
		defer close(done)
		if client == nil {
			// Retried every 30 s until it connects or the mirror stops.
			log.Warn("sparkd.mirror_unreachable", "err", err, "retry_in", "30s")
			if backoff.Retry(func() (err error) { client, err = Connect(uri); return err }, retry.Policy{Initial: 30 * time.Second}.Context(ctx)) != nil {
				return // stopped before it connected
			}
		}
		connected = client
		New(c, client, opts).Run(ctx)
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
