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
// session timeout: it opens a second connection that takes the session
// over (the server disconnects the original client), then closes the
// session from that connection, which deletes the session's ephemeral
// znodes. The original client learns that its session expired when it
// reconnects. It speaks ZooKeeper's wire protocol directly, because the Go
// client cannot attach to an existing session.
func ExpireSession(addr string, sessionID int64, passwd []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
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
		return err
	}
	resp, err := readFrame(c)
	if err != nil {
		return fmt.Errorf("zktest: reading the connect response: %w", err)
	}
	// ConnectResponse: protocolVersion, timeOut, sessionId, passwd.
	if len(resp) < 16 {
		return errors.New("zktest: short connect response")
	}
	if got := int64(binary.BigEndian.Uint64(resp[8:16])); got != sessionID {
		return fmt.Errorf("zktest: the server did not reattach session 0x%x (got 0x%x): already expired?", sessionID, got)
	}

	// CloseSession: xid, opcode -11.
	cl := binary.BigEndian.AppendUint32(nil, 1)
	cl = binary.BigEndian.AppendUint32(cl, uint32(0xFFFFFFF5)) // -11
	if err := writeFrame(c, cl); err != nil {
		return err
	}
	if _, err := readFrame(c); err != nil {
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
