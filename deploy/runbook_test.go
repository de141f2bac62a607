package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode"

	"gopkg.in/yaml.v3"
)

// githubAnchors returns the anchors GitHub makes of a Markdown file's
// headings: the heading's text in lower case, with spaces made hyphens and
// every character other than a letter, digit, hyphen or underscore left
// out; a repeated anchor gets -1, -2, … Headings inside fenced code blocks
// are no headings.
func githubAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(line, "#")
		if fenced || !ok {
			continue
		}
		text = strings.TrimSpace(strings.TrimLeft(text, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// TestGithubAnchors: the anchors are GitHub's.
func TestGithubAnchors(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/doc.md"
	doc := "# Operating dibs\n## Health and metrics\n```sh\n# not a heading\n```\n### `DibsIssueLag`: claims wait\n## Health and metrics\n## What's new? (v1.2)\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got := githubAnchors(t, path)
	for _, want := range []string{"operating-dibs", "health-and-metrics", "health-and-metrics-1", "dibsissuelag-claims-wait", "whats-new-v12"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] || len(got) != 5 {
		t.Errorf("anchors %v: want the five headings outside the code block", got)
	}
}

// TestAlertsHaveRunbooks: every alert rule carries a runbook_url that
// points at a section of docs/operations.md that exists, named after the
// alert, so whoever is paged lands on what to do.
func TestAlertsHaveRunbooks(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("prometheus/dibs-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	anchors := githubAnchors(t, "../docs/operations.md")
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			url := r.Annotations["runbook_url"]
			page, anchor, ok := strings.Cut(url, "#")
			switch {
			case url == "":
				t.Errorf("%s has no runbook_url", r.Alert)
			case !ok || !strings.HasSuffix(page, "/docs/operations.md"):
				t.Errorf("%s: runbook_url %q does not point at a section of docs/operations.md", r.Alert, url)
			case !anchors[anchor]:
				t.Errorf("%s: runbook_url %q: docs/operations.md has no heading with the anchor %q", r.Alert, url, anchor)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook_url %q: want the section named after the alert, #%s", r.Alert, url, strings.ToLower(r.Alert))
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules")
	}
}
