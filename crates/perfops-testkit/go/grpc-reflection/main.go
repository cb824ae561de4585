// A gRPC server with server reflection (grpc-go's own), for perfops' tests:
// bench.Echo (Say: the message back, every -unavailable-every'th call
// UNAVAILABLE instead; Count: a stream of three) declared in descriptors
// built here, so no protoc and no generated code: bench/echo.proto imports
// bench/msg.proto, so a client must take the file and its dependency.
// -reflection v1 | v1alpha | both | none says which reflection services
// it serves. It prints "listening on ADDR" once it listens.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/reflection"
	v1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The echo's messages go through as bytes; reflection's are protobuf messages.
type codec struct{}

func (codec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return proto.Marshal(v.(proto.Message))
}
func (codec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = append((*b)[:0], data...)
		return nil
	}
	return proto.Unmarshal(data, v.(proto.Message))
}
func (codec) Name() string { return "proto" }

func register() {
	s := proto.String
	msg := &descriptorpb.FileDescriptorProto{
		Name: s("bench/msg.proto"), Package: s("bench"), Syntax: s("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: s("Msg"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: s("text"), JsonName: s("text"), Number: proto.Int32(1),
					Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
					Type:  descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()},
				{Name: s("n"), JsonName: s("n"), Number: proto.Int32(2),
					Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
					Type:  descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()},
			},
		}},
	}
	echo := &descriptorpb.FileDescriptorProto{
		Name: s("bench/echo.proto"), Package: s("bench"), Syntax: s("proto3"),
		Dependency: []string{"bench/msg.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: s("Echo"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: s("Say"), InputType: s(".bench.Msg"), OutputType: s(".bench.Msg")},
				{Name: s("Count"), InputType: s(".bench.Msg"), OutputType: s(".bench.Msg"), ServerStreaming: proto.Bool(true)},
			},
		}},
	}
	for _, fd := range []*descriptorpb.FileDescriptorProto{msg, echo} {
		f, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
		if err != nil {
			log.Fatal(err)
		}
		if err := protoregistry.GlobalFiles.RegisterFile(f); err != nil {
			log.Fatal(err)
		}
	}
}

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "listen address")
	which := flag.String("reflection", "both", "v1, v1alpha, both or none")
	every := flag.Int64("unavailable-every", 0, "every n-th Say call fails with UNAVAILABLE (0: none)")
	flag.Parse()
	register()
	encoding.RegisterCodec(codec{})
	var calls atomic.Int64
	say := func(_ any, stream grpc.ServerStream) error {
		var b []byte
		if err := stream.RecvMsg(&b); err != nil {
			return err
		}
		if n := calls.Add(1); *every > 0 && n%*every == 0 {
			return status.Error(codes.Unavailable, "shedding load")
		}
		return stream.SendMsg(&b)
	}
	count := func(_ any, stream grpc.ServerStream) error {
		var b []byte
		if err := stream.RecvMsg(&b); err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if err := stream.SendMsg(&b); err != nil {
				return err
			}
		}
		return nil
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "bench.Echo",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{
			{StreamName: "Say", Handler: say},
			{StreamName: "Count", Handler: count, ServerStreams: true},
		},
		Metadata: "bench/echo.proto",
	}, struct{}{})
	switch *which {
	case "both":
		reflection.Register(s)
	case "v1":
		reflection.RegisterV1(s)
	case "v1alpha":
		v1alpha.RegisterServerReflectionServer(s, reflection.NewServer(reflection.ServerOptions{Services: s}))
	case "none":
	default:
		log.Fatalf("-reflection %s: v1, v1alpha, both or none", *which)
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", lis.Addr())
	os.Stdout.Sync()
	log.Fatal(s.Serve(lis))
}
