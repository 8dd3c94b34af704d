package memtest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTestingDocQuotesRecipes: every Go function that docs/testing.md
// shows is quoted exactly from recipes_test.go, and every recipe there is
// shown, so that what the page teaches is what `go test` runs.
func TestTestingDocQuotesRecipes(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/testing.md")
	require.NoError(t, err)
	src, err := os.ReadFile("recipes_test.go")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\nfunc (\\w+)(.*?)```").FindAllStringSubmatch(string(doc), -1)
	quoted := map[string]bool{}
	for _, b := range blocks {
		fn := "func " + b[1] + b[2]
		require.Truef(t, strings.Contains(string(src), fn), "docs/testing.md quotes %s not as in recipes_test.go", b[1])
		quoted[b[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^func (TestRecipe\w+)\(`).FindAllStringSubmatch(string(src), -1) {
		require.Truef(t, quoted[m[1]], "docs/testing.md does not show %s", m[1])
	}
}
