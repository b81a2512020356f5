package hip

import "fmt"

// Error is a failed HIP call: the call's name and the hipError_t it returned.
type Error struct {
	Call string
	Code int32
}

func (e *Error) Error() string {
	return fmt.Sprintf("hip: %s: %s (%d)", e.Call, ErrorName(e.Code), e.Code)
}

// ErrorName is the hipError_t's name as hip_runtime_api.h spells it (the first of its aliases),
// e.g. hipErrorOutOfMemory.
func ErrorName(code int32) string {
	if n, ok := errorNames[code]; ok {
		return n
	}
	return fmt.Sprintf("hipErrorUnknownCode%d", code)
}

// errorNames are the hipError_t values of hip_runtime_api.h.
var errorNames = map[int32]string{
	0:    "hipSuccess",
	1:    "hipErrorInvalidValue",
	2:    "hipErrorOutOfMemory",
	3:    "hipErrorNotInitialized",
	4:    "hipErrorDeinitialized",
	5:    "hipErrorProfilerDisabled",
	6:    "hipErrorProfilerNotInitialized",
	7:    "hipErrorProfilerAlreadyStarted",
	8:    "hipErrorProfilerAlreadyStopped",
	9:    "hipErrorInvalidConfiguration",
	12:   "hipErrorInvalidPitchValue",
	13:   "hipErrorInvalidSymbol",
	17:   "hipErrorInvalidDevicePointer",
	21:   "hipErrorInvalidMemcpyDirection",
	35:   "hipErrorInsufficientDriver",
	52:   "hipErrorMissingConfiguration",
	53:   "hipErrorPriorLaunchFailure",
	98:   "hipErrorInvalidDeviceFunction",
	100:  "hipErrorNoDevice",
	101:  "hipErrorInvalidDevice",
	200:  "hipErrorInvalidImage",
	201:  "hipErrorInvalidContext",
	202:  "hipErrorContextAlreadyCurrent",
	205:  "hipErrorMapFailed",
	206:  "hipErrorUnmapFailed",
	207:  "hipErrorArrayIsMapped",
	208:  "hipErrorAlreadyMapped",
	209:  "hipErrorNoBinaryForGpu",
	210:  "hipErrorAlreadyAcquired",
	211:  "hipErrorNotMapped",
	212:  "hipErrorNotMappedAsArray",
	213:  "hipErrorNotMappedAsPointer",
	214:  "hipErrorECCNotCorrectable",
	215:  "hipErrorUnsupportedLimit",
	216:  "hipErrorContextAlreadyInUse",
	217:  "hipErrorPeerAccessUnsupported",
	218:  "hipErrorInvalidKernelFile",
	219:  "hipErrorInvalidGraphicsContext",
	300:  "hipErrorInvalidSource",
	301:  "hipErrorFileNotFound",
	302:  "hipErrorSharedObjectSymbolNotFound",
	303:  "hipErrorSharedObjectInitFailed",
	304:  "hipErrorOperatingSystem",
	400:  "hipErrorInvalidHandle",
	401:  "hipErrorIllegalState",
	500:  "hipErrorNotFound",
	600:  "hipErrorNotReady",
	700:  "hipErrorIllegalAddress",
	701:  "hipErrorLaunchOutOfResources",
	702:  "hipErrorLaunchTimeOut",
	704:  "hipErrorPeerAccessAlreadyEnabled",
	705:  "hipErrorPeerAccessNotEnabled",
	708:  "hipErrorSetOnActiveProcess",
	709:  "hipErrorContextIsDestroyed",
	710:  "hipErrorAssert",
	712:  "hipErrorHostMemoryAlreadyRegistered",
	713:  "hipErrorHostMemoryNotRegistered",
	719:  "hipErrorLaunchFailure",
	720:  "hipErrorCooperativeLaunchTooLarge",
	801:  "hipErrorNotSupported",
	900:  "hipErrorStreamCaptureUnsupported",
	901:  "hipErrorStreamCaptureInvalidated",
	902:  "hipErrorStreamCaptureMerge",
	903:  "hipErrorStreamCaptureUnmatched",
	904:  "hipErrorStreamCaptureUnjoined",
	905:  "hipErrorStreamCaptureIsolation",
	906:  "hipErrorStreamCaptureImplicit",
	907:  "hipErrorCapturedEvent",
	908:  "hipErrorStreamCaptureWrongThread",
	910:  "hipErrorGraphExecUpdateFailure",
	999:  "hipErrorUnknown",
	1052: "hipErrorRuntimeMemory",
	1053: "hipErrorRuntimeOther",
}

// Codes New tells apart: what hipInit gives where no AMD GPU is present.
const (
	errNoDevice      = 100
	errInvalidDevice = 101
)

// check turns a hipError_t into an error naming the call.
func check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	return &Error{Call: call, Code: code}
}
