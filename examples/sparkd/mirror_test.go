package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gpugate/gpugate/internal/ferretdbtest"
	"github.com/gpugate/gpugate/spark"
)

func TestMain(m *testing.M) {
	code := m.Run()
	ferretdbtest.Stop()
	os.Exit(code)
}

// With mongo_uri in the fleet file, sparkd mirrors its state and history
// into MongoDB (here FerretDB on loopback), and never logs the URI.
func TestSparkd_MirrorsTheFleetIntoTheMongoURI(t *testing.T) {
	plain := ferretdbtest.URI(t)
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.yml")
	os.WriteFile(fleet, []byte("hosts:\n  - {name: gpu-a, managed: true}\nmongo_uri: "+plain+"\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokens, hostTok := hostToken(t, dir, "gpu-a")
	d := startSparkd(ctx, t, "-init", "-db", filepath.Join(dir, "spark.db"), "-fleet", fleet, "-tokens", tokens)
	cl, _ := spark.NewAPIClient(d.addr, mint(t, tokens, spark.RoleOperator, "ops"), nil)
	host, _ := spark.NewAPIClient(d.addr, hostTok, nil)
	st, err := cl.Request(ctx, spark.LeaseRequest{Class: spark.MergeCI})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Heartbeat(ctx, "gpu-a", 0); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := cl.Wait(wctx, st.Request.ID); err != nil {
		t.Fatal(err)
	}
	cancel() // the mirror's last pass runs as sparkd stops
	if code := <-d.done; code != 0 {
		t.Fatalf("exit %d: %s", code, d.logs.String())
	}
	client, err := mongo.Connect(options.Client().ApplyURI(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database("gpugate")
	defer db.Drop(context.Background())
	var r bson.M
	if err := db.Collection("reservations").FindOne(context.Background(), bson.D{{Key: "_id", Value: st.Request.ID}}).Decode(&r); err != nil {
		t.Fatalf("the lease is not mirrored: %v\n%s", err, d.logs.String())
	}
	if r["state"] != "active" || r["kind"] != "merge-ci" {
		t.Errorf("mirrored %v, want an active merge-ci lease", r)
	}
	n, err := db.Collection("history").CountDocuments(context.Background(), bson.D{{Key: "reservation", Value: st.Request.ID}, {Key: "kind", Value: "granted"}})
	if err != nil || n != 1 {
		t.Errorf("%d granted events mirrored for the lease (%v), want 1", n, err)
	}
	if strings.Contains(d.logs.String(), plain) {
		t.Errorf("sparkd logged the mongo_uri:\n%s", d.logs.String())
	}
}

// A mongo_uri the driver refuses stops sparkd at start (exit 2), and the
// message does not repeat the URI, which may hold a password.
func TestSparkd_ABadMongoURIIsRefusedWithoutPrintingIt(t *testing.T) {
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.yml")
	os.WriteFile(fleet, []byte("hosts:\n  - {name: gpu-a, managed: true}\nmongo_uri: 'mongodb://sparkd:pw-s3cret@db.internal:notaport/'\n"), 0o644)
	var logs strings.Builder
	code := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-init", "-db", filepath.Join(dir, "spark.db"), "-fleet", fleet}, &logs, nil)
	if code != 2 || strings.Contains(logs.String(), "pw-s3cret") || strings.Contains(logs.String(), "db.internal") {
		t.Errorf("exit %d: %s", code, logs.String())
	}
}
