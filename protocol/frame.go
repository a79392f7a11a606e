package protocol

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrFrameTooLarge means a peer announced a frame over the reader's limit;
// the stream must be reset, since what follows cannot be trusted.
var ErrFrameTooLarge = errors.New("frame exceeds the size limit")

// WriteFrame writes p as one frame: its length as an unsigned varint, then
// its bytes, in a single Write.
func WriteFrame(w io.Writer, p []byte) error {
	buf := make([]byte, 0, binary.MaxVarintLen64+len(p))
	buf = binary.AppendUvarint(buf, uint64(len(p)))
	buf = append(buf, p...)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame of at most max bytes. A frame cut short is
// io.ErrUnexpectedEOF; a clean end of stream before a frame starts is
// io.EOF; a length over max is ErrFrameTooLarge, before anything of the
// frame's body is read.
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("frame length: %w", err)
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes announced, the limit is %d", ErrFrameTooLarge, n, max)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return p, nil
}

// readFrameInto reads one frame into buf, which bounds its size, and
// returns its length; errors are ReadFrame's.
func readFrameInto(r *bufio.Reader, buf []byte) (int, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return 0, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("frame length: %w", err)
	}
	if n > uint64(len(buf)) {
		return 0, fmt.Errorf("%w: %d bytes announced, the limit is %d", ErrFrameTooLarge, n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return int(n), nil
}

// ask writes req as one JSON frame on w, then reads the answer, one JSON
// frame of at most max bytes, from r into answer. what names the answer
// in the error a malformed one gets (wrapping ErrProtocol).
func ask(w io.Writer, r *bufio.Reader, req any, max int, what string, answer any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := WriteFrame(w, b); err != nil {
		return err
	}
	return readJSON(r, max, what, answer)
}

// readJSON reads a frame of at most max bytes holding the JSON of v; what
// names it in the error if it does not.
func readJSON(r *bufio.Reader, max int, what string, v any) error {
	p, err := ReadFrame(r, max)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrProtocol, what, err)
	}
	return nil
}
