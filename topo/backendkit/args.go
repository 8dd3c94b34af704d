package backendkit

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/topokit/topokit/topo"
)

// AnyVersion is the version number CheckUpdate and CheckDelete return for a
// nil Version: the write is unconditional. No topo.NumericVersion is
// negative, so it never collides with a real version. (It is also
// ZooKeeper's "any version".)
const AnyVersion int64 = -1

// CheckCreate validates the arguments of Conn.Create and returns the
// canonical file path. It returns the InvalidPath *topo.Error of
// topo.CleanFilePath for a bad filePath, the InvalidPath *topo.Error of
// CheckReserved for a reserved one, and then the InvalidArgument
// *topo.Error of CheckValue when contents is larger than topo.MaxValueSize.
func CheckCreate(filePath string, contents []byte) (string, error) {
	p, err := cleanWritePath(filePath)
	if err != nil {
		return "", err
	}
	if err := CheckValue(p, contents); err != nil {
		return "", err
	}
	return p, nil
}

// CheckUpdate validates the arguments of Conn.Update. It returns the
// canonical file path and the compare-and-set version number: AnyVersion
// when version is nil, otherwise the number behind it. Errors, checked in
// this order: the InvalidPath *topo.Error of topo.CleanFilePath for a bad
// filePath; the InvalidPath *topo.Error of CheckReserved for a reserved
// one; the InvalidArgument *topo.Error of CheckValue when contents is
// larger than topo.MaxValueSize; the InvalidArgument *topo.Error of
// VersionNumber when version is not a topo.NumericVersion or is negative.
func CheckUpdate(filePath string, contents []byte, version topo.Version) (string, int64, error) {
	p, err := CheckCreate(filePath, contents)
	if err != nil {
		return "", 0, err
	}
	return withVersion(p, version)
}

// CheckDelete validates the arguments of Conn.Delete. It returns the
// canonical file path and the compare-and-set version number: AnyVersion
// when version is nil, otherwise the number behind it. Errors, checked in
// this order: the InvalidPath *topo.Error of topo.CleanFilePath for a bad
// filePath; the InvalidPath *topo.Error of CheckReserved for a reserved
// one; the InvalidArgument *topo.Error of VersionNumber when version is not
// a topo.NumericVersion or is negative.
func CheckDelete(filePath string, version topo.Version) (string, int64, error) {
	p, err := cleanWritePath(filePath)
	if err != nil {
		return "", 0, err
	}
	return withVersion(p, version)
}

// CheckGetVersion validates the arguments of Conn.GetVersion and returns
// the canonical file path: the InvalidPath *topo.Error of
// topo.CleanFilePath for a bad filePath (reads are not refused at reserved
// paths), then an InvalidArgument *topo.Error when version is negative. A
// backend that keeps no history runs it too, and returns NoImplementation
// only after it and the Closed check.
func CheckGetVersion(filePath string, version int64) (string, error) {
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return "", err
	}
	if version < 0 {
		return "", Wrap(topo.InvalidArgument, p, fmt.Errorf("version %d is negative", version))
	}
	return p, nil
}

// cleanWritePath is topo.CleanFilePath followed by CheckReserved: the path
// checks of every write, in one pass (CleanPlain) for a plain path.
func cleanWritePath(filePath string) (string, error) {
	if p, ok := CleanPlain(filePath); ok {
		return p, nil
	}
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return "", err
	}
	if err := CheckReserved(p); err != nil {
		return "", err
	}
	return p, nil
}

// withVersion returns the canonical path p with the number behind version
// (VersionNumber), AnyVersion for a nil version.
func withVersion(p string, version topo.Version) (string, int64, error) {
	if version == nil {
		return p, AnyVersion, nil
	}
	n, err := VersionNumber(p, version)
	if err != nil {
		return "", 0, err
	}
	return p, n, nil
}

// VersionNumber returns the int64 behind a non-nil topo.NumericVersion. It
// returns an InvalidArgument *topo.Error for path when v is of another type
// (a version issued by a foreign backend) or negative. Backends call it on
// the versions handed to Update, Delete and Txn.
func VersionNumber(path string, v topo.Version) (int64, error) {
	n, ok := v.(topo.NumericVersion)
	if !ok || n < 0 {
		return 0, Wrap(topo.InvalidArgument, path, errors.New("bad version "+strconv.Quote(versionString(v))))
	}
	return int64(n), nil
}

func versionString(v topo.Version) string {
	if v == nil {
		return "<nil>"
	}
	return v.String()
}

// CheckElection validates the arguments of Conn.NewLeaderParticipation and
// returns the canonical election name. It returns an InvalidArgument
// *topo.Error (for the name as given) when name or id is empty, otherwise
// the InvalidPath *topo.Error of topo.CleanFilePath when name is not a
// valid path, and an InvalidPath *topo.Error naming the reserved-name rule
// when a segment of name is "locks" or "Lock" (an election's entries live
// below elections/<name>/, so such a name would collide with another
// election's layout). It puts no limit on id's size.
func CheckElection(name, id string) (string, error) {
	if name == "" || id == "" {
		return "", Wrap(topo.InvalidArgument, name, errors.New("an election needs a name and a participant id"))
	}
	n, err := topo.CleanFilePath(name)
	if err != nil {
		return "", err
	}
	// Below elections/, only the lock segments are reserved.
	if topo.IsReserved("x/" + n) {
		return "", Wrap(topo.InvalidPath, n, errReserved)
	}
	return n, nil
}
