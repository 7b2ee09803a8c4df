package main

import (
	"net/http"
	"testing"
)

// TestSecondAuthorizationHeaderAttack: a run request with two
// Authorization headers (the run's capability and another) is refused 401
// whichever comes first: a front end and the attester could each read
// another one. A capability in the query string is not a credential.
func TestSecondAuthorizationHeaderAttack(t *testing.T) {
	a, pf := startWithPack(t, nil)
	rn := a.createRun(t, pf, "agent:main:main")
	other := a.createRun(t, pf, "agent:main:other")
	base := "/v1/runs/" + rn.id
	send := func(query string, caps ...string) int {
		t.Helper()
		r, _ := http.NewRequest("GET", "http://attester"+base+"/audit"+query, nil)
		for _, c := range caps {
			r.Header.Add("Authorization", "Bearer "+c)
		}
		resp, err := a.control.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		what  string
		query string
		caps  []string
		code  int
	}{
		{"own capability then another run's", "", []string{rn.capability, other.capability}, 401},
		{"another run's then own capability", "", []string{other.capability, rn.capability}, 401},
		{"own capability twice", "", []string{rn.capability, rn.capability}, 401},
		{"capability in the query", "?access_token=" + rn.capability, nil, 401},
		{"capability in the query and another run's header", "?authorization=Bearer%20" + rn.capability, []string{other.capability}, 403},
		{"own capability, one header", "", []string{rn.capability}, 200},
	} {
		if got := send(c.query, c.caps...); got != c.code {
			t.Errorf("%s: %d, want %d", c.what, got, c.code)
		}
	}
}
