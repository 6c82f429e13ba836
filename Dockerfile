# trackd in a container: a build stage with the compilers and -dev packages, and a runtime stage
# with only the shared libraries trackd and trackd-fleet load, running as an unprivileged user.
#
#   docker build -t trackd .
#   docker run --rm trackd version
#
# Arrow/Parquet C++ come from the pinned pyarrow wheel (Debian 12 packages no Arrow; see
# README.md): the build stage installs it into a virtualenv, and the runtime stage gets only its
# libarrow/libparquet/libarrow_s3 shared libraries (the last for s3:// warehouses; it bundles the
# AWS SDK).

FROM debian:bookworm AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      librdkafka-dev libpq-dev libgeos-dev libproj-dev libsimdjson-dev \
      libboost-dev libboost-system-dev libfmt-dev libtomlplusplus-dev \
      nlohmann-json3-dev zlib1g-dev protobuf-compiler libprotobuf-dev libprotoc-dev \
      python3 python3-venv nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY scripts/python-requirements.txt scripts/
# Only pyarrow (the C++ libraries and headers); the other pinned packages are test tools.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir -q "$(grep '^pyarrow==' scripts/python-requirements.txt)" \
    && /opt/venv/bin/python -c 'import pyarrow; pyarrow.create_library_symlinks()'
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTRACKD_BUILD_TESTS=OFF -DTRACKD_BUILD_BENCH=OFF \
      -DTRACKD_ARROW_ROUTE=pyarrow -DTRACKD_PYTHON=/opt/venv/bin/python \
    && cmake --build /build --target trackd trackd-fleet \
    && mkdir -p /out/bin /out/lib \
    && cp /build/server/trackd /build/tools/trackd-fleet /out/bin/ \
    && strip /out/bin/* \
    && ldd /out/bin/trackd | awk '/\/opt\/venv\// { print $3 }' | xargs -r cp -L -t /out/lib/

FROM debian:bookworm-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      librdkafka1 libpq5 libgeos-c1v5 libproj25 proj-data libsimdjson14 libfmt9 \
      libtomlplusplus3 zlib1g libprotobuf32 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/lib/ /usr/local/lib/
COPY --from=build /out/bin/ /usr/local/bin/
RUN ldconfig \
    && useradd --system --uid 10001 --home-dir /var/lib/trackd --create-home trackd \
    && mkdir -p /var/lib/trackd/warehouse && chown -R trackd /var/lib/trackd
USER trackd
WORKDIR /var/lib/trackd
# The API and, with TRACKD_METRICS_LISTEN=0.0.0.0:9464, the metrics.
ENV TRACKD_HTTP_LISTEN=0.0.0.0:8080
EXPOSE 8080 9464
ENTRYPOINT ["/usr/local/bin/trackd"]
CMD ["run"]
