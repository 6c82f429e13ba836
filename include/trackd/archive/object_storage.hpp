// Arrow's S3 subsystem (the AWS SDK) for the whole process: an archive warehouse on s3:// needs
// it. Contract: one ObjectStorageRuntime in main, made before any thread touches object storage
// and destroyed after the last archive object is gone (it finalises the SDK; Arrow refuses S3
// calls afterwards). Making it costs nothing when no s3:// warehouse is used: the SDK starts
// on first use.
#pragma once

namespace trackd::archive {

class ObjectStorageRuntime {
  public:
    ObjectStorageRuntime() = default;
    ~ObjectStorageRuntime();
    ObjectStorageRuntime(const ObjectStorageRuntime&) = delete;
    ObjectStorageRuntime& operator=(const ObjectStorageRuntime&) = delete;
};

}  // namespace trackd::archive
