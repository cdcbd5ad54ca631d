package smoke

import "errors"

// dlopenFake: the C stand-ins are shared objects for the proof's Linux
// backend; Windows has neither.
func dlopenFake(string) (uintptr, error) {
	return 0, errors.New("the CUDA stand-ins are Linux shared objects")
}
