// Package ghclient builds the go-github v66 client the commands use: as a
// GitHub App installation when GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID
// and GITHUB_APP_PRIVATE_KEY_FILE are set (a fresh installation token
// minted shortly before each one expires), otherwise with GITHUB_TOKEN.
// Either client talks to GITHUB_API_URL when it names another server
// than github.com (GitHub Enterprise Server, or a test server), and
// waits out a spent rate limit when the wait fits the caller's deadline,
// failing with go-github's RateLimitError or AbuseRateLimitError when it
// does not.
//
// New is the client of every command that calls GitHub; NewApp is the
// App itself, for the endpoints under /app that an installation token
// cannot call; RequireCredentials checks the settings without calling
// GitHub. Every setting is read through a getenv function (os.Getenv in
// a main), so a test passes its own environment.
package ghclient
