// Arrow's S3 subsystem (the AWS SDK) for the whole process: an archive warehouse on s3:// needs
// it. Contract: one ObjectStorageRuntime in main, made before any thread touches object storage
// and destroyed after the last archive object is gone (it finalises the SDK; Arrow refuses S3
// calls afterwards). Making it costs nothing when no s3:// warehouse is used: the SDK starts
// on first use. It sets AWS_DEFAULT_REGION (to us-east-1) when the environment names no region:
// the SDK's client configuration otherwise asks the EC2 instance metadata service
// (169.254.169.254) for one at every start, although trackd always passes its own
// (archive.s3_region); it is set here, in main, before any other thread exists.
#pragma once

namespace trackd::archive {

class ObjectStorageRuntime {
  public:
    ObjectStorageRuntime();
    ~ObjectStorageRuntime();
    ObjectStorageRuntime(const ObjectStorageRuntime&) = delete;
    ObjectStorageRuntime& operator=(const ObjectStorageRuntime&) = delete;
};

}  // namespace trackd::archive
