package claims

// Defect is a deliberate defect of the engine, for the mutation kit
// (topo/test/mutation, EngineMutants): the conformance suite must fail on
// a backend whose engine has one. Never set it outside tests.
type Defect string

// The defects. Each names the rule of the engine it breaks.
const (
	// DefectNone is the engine without a defect.
	DefectNone Defect = ""
	// DefectGrantSecond grants the entry second in its queue as well as
	// the head: two holders.
	DefectGrantSecond Defect = "engine-grant-second"
	// DefectSkipWait grants without waiting for the predecessor.
	DefectSkipWait Defect = "engine-skip-wait"
	// DefectLossKeepsClaims declares a session lost without ending its
	// claims: Done stays open, leadership contexts live on.
	DefectLossKeepsClaims Defect = "engine-loss-keeps-claims"
	// DefectTokenIsPosition gives a claim its place in the queue as its
	// token instead of the store's order key: tokens repeat.
	DefectTokenIsPosition Defect = "engine-token-is-position"
)

// Defects returns every defect with what it gets wrong, in a fixed order.
func Defects() []struct {
	Defect Defect
	What   string
} {
	return []struct {
		Defect Defect
		What   string
	}{
		{DefectGrantSecond, "the engine grants a lock or leadership to the entry second in the queue as well as to the head"},
		{DefectSkipWait, "the engine grants every entry at once, without waiting for its predecessor to go"},
		{DefectLossKeepsClaims, "declaring a session lost ends none of its claims"},
		{DefectTokenIsPosition, "a claim's token is its place in the queue, not the store's order key"},
	}
}
