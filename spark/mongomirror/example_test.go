package mongomirror_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/gpugate/gpugate/spark"
	"github.com/gpugate/gpugate/spark/mongomirror"
	"github.com/gpugate/gpugate/spark/sparktest"
)

// A controller mirrored into MongoDB: Run goes on in its own goroutine
// for as long as the controller serves, and admission never waits for it.
func Example() {
	opts := spark.DefaultOptions()
	opts.Service = &sparktest.Service{}
	ctrl, err := spark.New(sparktest.NewStore(), opts)
	if err != nil {
		log.Fatal(err)
	}
	client, err := mongomirror.Connect("mongodb://127.0.0.1:27017/")
	if err != nil {
		log.Fatal(err)
	}
	m := mongomirror.New(ctrl, client, mongomirror.Options{
		Names: map[string]string{"spark-1": "Spark 1", "spark-2": "Spark 2"},
		Log:   slog.Default(),
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go m.Run(ctx)
}
