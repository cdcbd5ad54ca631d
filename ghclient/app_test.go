package ghclient

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

// fakeApp is GitHub's side of App authentication: it checks each JWT
// against the App's public key and mints installation tokens that expire
// after ttl.
type fakeApp struct {
	t     *testing.T
	key   *rsa.PublicKey
	ttl   time.Duration
	fail  bool
	mu    sync.Mutex
	mints int
	auths []string // the Authorization of each API call
}

func (f *fakeApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v3/app/installations/77/access_tokens":
		if f.fail {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"message":"A JSON web token could not be decoded"}`))
			return
		}
		f.checkJWT(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		f.mints++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"token":"ghs_minted_%d","expires_at":%q}`, f.mints, time.Now().Add(f.ttl).UTC().Format(time.RFC3339))
	case r.URL.Path == "/api/v3/app/hook/deliveries":
		// Only the App itself may read them: a JWT, never an
		// installation token.
		f.checkJWT(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		f.auths = append(f.auths, "jwt")
		w.Write([]byte(`[]`))
	case r.URL.Path == "/api/v3/repos/o/r":
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		w.Write([]byte(`{"full_name":"o/r"}`))
	default:
		http.NotFound(w, r)
	}
}

// checkJWT verifies the token GitHub would: RS256 by the App's key,
// issued by App 12, valid for at most ten minutes, issued in the past.
func (f *fakeApp) checkJWT(jwt string) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		f.t.Errorf("JWT %q has %d parts", jwt, len(parts))
		return
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(f.key, crypto.SHA256, sum[:], sig); err != nil {
		f.t.Errorf("the JWT's signature: %v", err)
	}
	var header map[string]string
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	c, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if json.Unmarshal(h, &header) != nil || header["alg"] != "RS256" || json.Unmarshal(c, &claims) != nil {
		f.t.Errorf("JWT header %s, claims %s", h, c)
	}
	if now := time.Now().Unix(); claims.Iss != "12" || claims.Exp-claims.Iat > 600 || claims.Iat > now || claims.Exp <= now {
		f.t.Errorf("JWT claims %+v at %d", claims, now)
	}
}

func appKeyFile(t *testing.T) (string, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "app.pem")
	os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	return path, key
}

// appClient is New as App 12's installation 77, with a static
// GITHUB_TOKEN beside it, against fake.
func appClient(t *testing.T, fake *fakeApp, keyFile string) *github.Client {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	env := map[string]string{"GITHUB_API_URL": srv.URL + "/api/v3", "GITHUB_TOKEN": "ghs_static",
		EnvAppID: "12", EnvAppInstallationID: "77", EnvAppPrivateKeyFile: keyFile}
	c, err := New(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A long-running process authenticates as the App: it mints an
// installation token with a signed JWT, reuses it while it is fresh, and
// mints a new one before it expires. The App takes precedence over a
// GITHUB_TOKEN.
func TestGitHubClient_AuthenticatesAsAGitHubAppAndRefreshesItsToken(t *testing.T) {
	keyFile, key := appKeyFile(t)
	for name, tc := range map[string]struct {
		ttl       time.Duration
		wantMints int
		wantAuth  []string
	}{
		"a fresh token is reused":             {time.Hour, 1, []string{"Bearer ghs_minted_1", "Bearer ghs_minted_1"}},
		"a token about to expire is reminted": {5 * time.Second, 2, []string{"Bearer ghs_minted_1", "Bearer ghs_minted_2"}},
	} {
		t.Run(name, func(t *testing.T) {
			fake := &fakeApp{t: t, key: &key.PublicKey, ttl: tc.ttl}
			c := appClient(t, fake, keyFile)
			for range 2 {
				if _, _, err := c.Repositories.Get(context.Background(), "o", "r"); err != nil {
					t.Fatal(err)
				}
			}
			if fake.mints != tc.wantMints || strings.Join(fake.auths, ",") != strings.Join(tc.wantAuth, ",") {
				t.Errorf("%d mints, authorizations %v; want %d, %v", fake.mints, fake.auths, tc.wantMints, tc.wantAuth)
			}
		})
	}
}

// App settings it cannot use are refused before any call, naming what to
// set, and no error ever quotes the key file's contents.
func TestGitHubClient_RefusesAppSettingsItCannotUse(t *testing.T) {
	keyFile, _ := appKeyFile(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("SECRET-KEY-MATERIAL"), 0o600)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecFile := filepath.Join(dir, "ec.pem")
	os.WriteFile(ecFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	for name, tc := range map[string]struct {
		env     map[string]string
		wantErr error // wrapped besides ErrApp; nil: ErrApp alone
		want    string
	}{
		"only the ID":            {map[string]string{EnvAppID: "12"}, nil, "set all of"},
		"a non-numeric ID":       {map[string]string{EnvAppID: "my-app", EnvAppInstallationID: "77", EnvAppPrivateKeyFile: keyFile}, nil, "numeric IDs"},
		"a missing key file":     {map[string]string{EnvAppID: "12", EnvAppInstallationID: "77", EnvAppPrivateKeyFile: filepath.Join(dir, "missing.pem")}, os.ErrNotExist, EnvAppPrivateKeyFile},
		"a file that is not PEM": {map[string]string{EnvAppID: "12", EnvAppInstallationID: "77", EnvAppPrivateKeyFile: notPEM}, nil, "not a PEM private key"},
		"an EC key":              {map[string]string{EnvAppID: "12", EnvAppInstallationID: "77", EnvAppPrivateKeyFile: ecFile}, nil, "not an RSA private key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), func(k string) string { return tc.env[k] })
			if !errors.Is(err, ErrApp) || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("%v, want ErrApp wrapping %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET-KEY-MATERIAL") {
				t.Errorf("%v, want it to say %q and never quote the key file", err, tc.want)
			}
		})
	}
}

// When GitHub refuses to mint a token, the call fails with ErrApp: never
// unauthenticated, never with the static token.
func TestGitHubClient_AFailedMintFailsTheCall(t *testing.T) {
	keyFile, key := appKeyFile(t)
	fake := &fakeApp{t: t, key: &key.PublicKey, fail: true}
	c := appClient(t, fake, keyFile)
	if _, _, err := c.Repositories.Get(context.Background(), "o", "r"); !errors.Is(err, ErrApp) {
		t.Errorf("a refused mint: %v, want ErrApp", err)
	}
	if len(fake.auths) != 0 {
		t.Errorf("the API was called anyway with %v", fake.auths)
	}
}

// NewApp calls /app endpoints as the App itself, with a signed
// JWT (never an installation token, which GitHub refuses there), and
// refuses to work without the App's settings.
func TestGitHubAppClient_CallsAsTheAppWithAJWT(t *testing.T) {
	keyFile, key := appKeyFile(t)
	fake := &fakeApp{t: t, key: &key.PublicKey, ttl: time.Hour}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	env := map[string]string{"GITHUB_API_URL": srv.URL + "/api/v3", "GITHUB_TOKEN": "ghs_static",
		EnvAppID: "12", EnvAppInstallationID: "77", EnvAppPrivateKeyFile: keyFile}
	c, err := NewApp(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Apps.ListHookDeliveries(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if fake.mints != 0 || strings.Join(fake.auths, ",") != "jwt" {
		t.Errorf("%d installation tokens minted, authorizations %v: want the JWT alone", fake.mints, fake.auths)
	}
	delete(env, EnvAppID)
	delete(env, EnvAppInstallationID)
	delete(env, EnvAppPrivateKeyFile)
	if _, err := NewApp(context.Background(), func(k string) string { return env[k] }); !errors.Is(err, ErrApp) || !strings.Contains(err.Error(), "only the App itself") {
		t.Errorf("without the App's settings: %v", err)
	}
}
