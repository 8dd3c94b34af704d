package topo

import "errors"

// The argument checks every backend runs before it touches its store, in
// one order (path syntax, then the reserved-name rule, then value, then
// version), so that all backends reject the same bad input with the same
// *Error.

// AnyVersion is the version number CheckUpdate and CheckDelete return for a
// nil Version: the write is unconditional. No NumericVersion is negative,
// so it never collides with a real version. (It is also ZooKeeper's "any
// version".)
const AnyVersion int64 = -1

// CheckCreate validates the arguments of Conn.Create and returns the
// canonical file path. It returns the InvalidPath *Error of CleanFilePath
// for a bad filePath, the InvalidPath *Error of CheckReserved for a
// reserved one, and then the InvalidArgument *Error of CheckValue when
// contents is larger than MaxValueSize.
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
// this order: the InvalidPath *Error of CleanFilePath for a bad filePath;
// the InvalidPath *Error of CheckReserved for a reserved one;
// the InvalidArgument *Error of CheckValue when contents is larger than
// MaxValueSize; the InvalidArgument *Error of VersionNumber when version is
// not a NumericVersion or is negative.
func CheckUpdate(filePath string, contents []byte, version Version) (string, int64, error) {
	p, err := CheckCreate(filePath, contents)
	if err != nil {
		return "", 0, err
	}
	return withVersion(p, version)
}

// CheckDelete validates the arguments of Conn.Delete. It returns the
// canonical file path and the compare-and-set version number: AnyVersion
// when version is nil, otherwise the number behind it. Errors, checked in
// this order: the InvalidPath *Error of CleanFilePath for a bad filePath;
// the InvalidPath *Error of CheckReserved for a reserved one; the
// InvalidArgument *Error of VersionNumber when version is not a
// NumericVersion or is negative.
func CheckDelete(filePath string, version Version) (string, int64, error) {
	p, err := cleanWritePath(filePath)
	if err != nil {
		return "", 0, err
	}
	return withVersion(p, version)
}

// cleanWritePath is CleanFilePath followed by CheckReserved: the path
// checks of every write.
func cleanWritePath(filePath string) (string, error) {
	p, err := CleanFilePath(filePath)
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
func withVersion(p string, version Version) (string, int64, error) {
	if version == nil {
		return p, AnyVersion, nil
	}
	n, err := VersionNumber(p, version)
	if err != nil {
		return "", 0, err
	}
	return p, n, nil
}

// CheckElection validates the arguments of Conn.NewLeaderParticipation and
// returns the canonical election name. It returns an InvalidArgument *Error
// (for the name as given) when name or id is empty, otherwise the
// InvalidPath *Error of CleanFilePath when name is not a valid path, and
// an InvalidPath *Error naming the reserved-name rule when a segment of
// name is "locks" or "Lock" (an election's entries live below
// elections/<name>/, so such a name would collide with another election's
// layout). It puts no limit on id's size.
func CheckElection(name, id string) (string, error) {
	if name == "" || id == "" {
		return "", &Error{Code: InvalidArgument, Path: name, Err: errors.New("an election needs a name and a participant id")}
	}
	n, err := CleanFilePath(name)
	if err != nil {
		return "", err
	}
	if hasLockSegment(n) {
		return "", &Error{Code: InvalidPath, Path: n, Err: errReserved}
	}
	return n, nil
}
