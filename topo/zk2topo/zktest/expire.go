package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ExpireSession makes the server at addr drop the session sessionID (whose
// password is passwd) at once, as if its client had been gone for the
// session timeout: TakeOverSession, then Close. The original client learns
// that its session expired when it reconnects.
func ExpireSession(addr string, sessionID int64, passwd []byte) error {
	s, err := TakeOverSession(addr, sessionID, passwd)
	if err != nil {
		return err
	}
	return s.Close()
}

// TakenSession is a session taken over by TakeOverSession.
type TakenSession struct {
	conn net.Conn
}

// TakeOverSession attaches a second connection to the session sessionID
// (password passwd) on the server at addr. The server then disconnects the
// session's original client (which reconnects and, while the session
// lives, keeps it). Close on the result closes the session, which expires
// it for the original client and deletes its ephemeral znodes. It speaks
// ZooKeeper's wire protocol directly, because the Go client cannot attach
// to an existing session.
func TakeOverSession(addr string, sessionID int64, passwd []byte) (*TakenSession, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))

	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd, readOnly.
	req := make([]byte, 0, 64)
	req = binary.BigEndian.AppendUint32(req, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 30000)
	req = binary.BigEndian.AppendUint64(req, uint64(sessionID))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	req = append(req, 0)
	if err := writeFrame(c, req); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := readFrame(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("zktest: reading the connect response: %w", err)
	}
	// ConnectResponse: protocolVersion, timeOut, sessionId, passwd.
	if len(resp) < 16 {
		c.Close()
		return nil, errors.New("zktest: short connect response")
	}
	if got := int64(binary.BigEndian.Uint64(resp[8:16])); got != sessionID {
		c.Close()
		return nil, fmt.Errorf("zktest: the server did not reattach session 0x%x (got 0x%x): already expired?", sessionID, got)
	}
	return &TakenSession{conn: c}, nil
}

// Close closes the taken-over session on the server, then the connection.
func (s *TakenSession) Close() error {
	defer s.conn.Close()
	_ = s.conn.SetDeadline(time.Now().Add(10 * time.Second))
	// CloseSession: xid, opcode -11.
	cl := binary.BigEndian.AppendUint32(nil, 1)
	cl = binary.BigEndian.AppendUint32(cl, uint32(0xFFFFFFF5)) // -11
	if err := writeFrame(s.conn, cl); err != nil {
		return err
	}
	if _, err := readFrame(s.conn); err != nil {
		return fmt.Errorf("zktest: reading the close response: %w", err)
	}
	return nil
}

func writeFrame(w io.Writer, b []byte) error {
	f := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(f, b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("zktest: frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
