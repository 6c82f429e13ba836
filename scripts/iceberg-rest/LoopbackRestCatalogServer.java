/*
 * Apache Iceberg's REST catalog server (the servlet of org.apache.iceberg.rest.RESTCatalogServer,
 * iceberg-open-api test fixtures) on 127.0.0.1 only: the stock main binds every interface.
 * Configured like the stock server by CATALOG_* environment variables (prefix dropped, "__" ->
 * "-", "_" -> ".", lower-cased): CATALOG_WAREHOUSE, CATALOG_URI, CATALOG_IO__IMPL,
 * CATALOG_S3_ENDPOINT, ... and the port in CATALOG_REST_PORT. Started by scripts/iceberg-rest.sh.
 *
 * For the crash tests, TRACKD_TEST_REST_PAUSE_ARM names a file: while it exists, a metadata file
 * the server writes stops the writing thread right after the file is complete, before the
 * catalog's pointer moves (the JDBC catalog's UPDATE), and "paused after writing <location>" is
 * printed; the test kills the server there.
 */
package org.apache.iceberg.rest;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.io.PositionOutputStream;
import org.apache.iceberg.io.ResolvingFileIO;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class LoopbackRestCatalogServer {
  private LoopbackRestCatalogServer() {}

  static final String PAUSE_ARM = System.getenv("TRACKD_TEST_REST_PAUSE_ARM");

  /** ResolvingFileIO whose metadata files can stop the server once written (see above). */
  public static final class PausingFileIO extends ResolvingFileIO {
    @Override
    public OutputFile newOutputFile(String location) {
      OutputFile out = super.newOutputFile(location);
      if (!location.endsWith(".metadata.json")) return out;
      return new OutputFile() {
        @Override
        public PositionOutputStream create() {
          return pausingAfterClose(out.create(), location);
        }

        @Override
        public PositionOutputStream createOrOverwrite() {
          return pausingAfterClose(out.createOrOverwrite(), location);
        }

        @Override
        public String location() {
          return out.location();
        }

        @Override
        public InputFile toInputFile() {
          return out.toInputFile();
        }
      };
    }
  }

  static PositionOutputStream pausingAfterClose(PositionOutputStream s, String location) {
    return new PositionOutputStream() {
      @Override
      public long getPos() throws IOException {
        return s.getPos();
      }

      @Override
      public void write(int b) throws IOException {
        s.write(b);
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        s.write(b, off, len);
      }

      @Override
      public void flush() throws IOException {
        s.flush();
      }

      @Override
      public void close() throws IOException {
        s.close();
        if (PAUSE_ARM == null || !Files.exists(Paths.get(PAUSE_ARM))) return;
        System.out.println("paused after writing " + location);
        System.out.flush();
        try {
          Thread.sleep(Long.MAX_VALUE);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    };
  }

  static Map<String, String> environmentConfig() {
    Map<String, String> out = new HashMap<>();
    for (Map.Entry<String, String> e : System.getenv().entrySet()) {
      if (!e.getKey().startsWith("CATALOG_")) continue;
      String key =
          e.getKey()
              .substring("CATALOG_".length())
              .replace("__", "-")
              .replace("_", ".")
              .toLowerCase(Locale.ROOT);
      out.put(key, e.getValue());
    }
    return out;
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> props = environmentConfig();
    props.putIfAbsent(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    props.putIfAbsent(CatalogProperties.URI, "jdbc:sqlite::memory:");
    props.putIfAbsent("jdbc.schema-version", "V1");
    if (!props.containsKey(CatalogProperties.WAREHOUSE_LOCATION)) {
      throw new IllegalArgumentException("CATALOG_WAREHOUSE is not set");
    }
    if (PAUSE_ARM != null) props.put(CatalogProperties.FILE_IO_IMPL, PausingFileIO.class.getName());
    String host = props.getOrDefault("rest.host", "127.0.0.1");
    int port = Integer.parseInt(props.getOrDefault("rest.port", "8181"));

    Catalog backend = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());
    RESTCatalogAdapter adapter =
        new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(backend, props));
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    System.out.println("iceberg rest catalog listening on " + host + ":" + port);
    server.join();
  }
}
