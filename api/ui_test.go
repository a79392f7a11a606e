package api

import (
	"testing"
	"time"
)

func TestALoginCodeWorksOnceAndNotOnceExpired(t *testing.T) {
	var u uiAuth
	code, _ := u.newCode()
	if _, ok := u.login(code); !ok {
		t.Fatal("a fresh code did not log in")
	}
	if _, ok := u.login(code); ok {
		t.Fatal("a code logged in twice")
	}
	late, _ := u.newCode()
	u.mu.Lock()
	u.codes[late] = time.Now().Add(-time.Second)
	u.mu.Unlock()
	if _, ok := u.login(late); ok {
		t.Fatal("an expired code logged in")
	}
}
