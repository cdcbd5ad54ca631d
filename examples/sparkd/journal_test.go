package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpugate/gpugate/spark/fleet"
)

// A delivery sparkd answered 202 but had not processed when it was told
// to stop (here GitHub never answers what it asks) is
// journalled beside the database, so the restarted sparkd redelivers it.
func TestSparkd_ADeliveryInFlightAtShutdownIsJournalled(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	processing := make(chan struct{}, 1)
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v3/app/installations/77/access_tokens":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"token":"ghs_test","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		case "/api/v3/app/hook/deliveries":
			fmt.Fprint(w, `[]`)
		default: // the delivery's processing: never answered
			select {
			case processing <- struct{}{}:
			default:
			}
			<-r.Context().Done()
		}
	}))
	defer gh.Close()
	t.Setenv("GITHUB_API_URL", gh.URL+"/api/v3")
	t.Setenv("GITHUB_APP_ID", "12")
	t.Setenv("GITHUB_APP_INSTALLATION_ID", "77")
	t.Setenv("GITHUB_APP_PRIVATE_KEY_FILE", keyFile)
	t.Setenv("GITHUB_TOKEN", "")
	secretFile := filepath.Join(dir, "whsecret")
	os.WriteFile(secretFile, []byte("a-webhook-secret\n"), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startSparkd(ctx, t, "-init", "-db", filepath.Join(dir, "spark.db"), "-webhook-secret-file", secretFile, "-github-org", "o", "-jit-dir", t.TempDir())
	body, _ := json.Marshal(map[string]any{"action": "labeled", "label": map[string]any{"name": "spark-test"}, "sender": map[string]any{"login": "maint"},
		"pull_request": map[string]any{"number": 7, "state": "open", "head": map[string]any{"sha": "1111111111111111111111111111111111111111"}}, "repository": map[string]any{"full_name": "o/butter"}})
	req, _ := http.NewRequest("POST", d.addr+"/github/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "label-7")
	m := hmac.New(sha256.New, []byte("a-webhook-secret"))
	m.Write(body)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery: %v %v", resp, err)
	}
	resp.Body.Close()
	<-processing
	cancel()
	if code := <-d.done; code != 0 {
		t.Fatalf("exit %d: %s", code, d.logs)
	}
	got, err := fleet.Unprocessed(dir)
	if err != nil || len(got) != 1 || got["label-7"].IsZero() {
		t.Errorf("journal %v, %v; want label-7\n%s", got, err, d.logs)
	}
}
