// The OpenAPI 3 description of /api/v1 (kept next to the routes in api.cc; a test checks that
// every route is described). A literal rather than nlohmann initializer lists: those take
// minutes to compile.

#include "server/api.h"

namespace stoker::server {

const std::string& OpenApiDocument() {
  static const std::string doc = R"openapi({
 "openapi": "3.0.3",
 "info": {
  "title": "Stoker API",
  "version": "1",
  "description": "Jobs, nodes and scheduling of a Stoker GPU cluster. Every endpoint except /health and /openapi.json needs Authorization: Bearer <token>."
 },
 "servers": [
  {
   "url": "/api/v1"
  }
 ],
 "security": [
  {
   "bearer": []
  }
 ],
 "components": {
  "securitySchemes": {
   "bearer": {
    "type": "http",
    "scheme": "bearer"
   }
  },
  "schemas": {
   "Error": {
    "type": "object",
    "properties": {
     "error": {
      "type": "object",
      "properties": {
       "code": {
        "type": "string"
       },
       "message": {
        "type": "string"
       },
       "field": {
        "type": "string",
        "description": "the offending field, for validation errors"
       }
      }
     }
    }
   },
   "JobSpec": {
    "type": "object",
    "required": [
     "command"
    ],
    "additionalProperties": false,
    "properties": {
     "name": {
      "type": "string",
      "maxLength": 128
     },
     "command": {
      "type": "array",
      "items": {
       "type": "string"
      },
      "minItems": 1
     },
     "env": {
      "type": "object",
      "additionalProperties": {
       "type": "string"
      }
     },
     "workdir": {
      "type": "string",
      "description": "absolute path"
     },
     "gpus": {
      "type": "integer",
      "minimum": 0,
      "description": "whole GPUs on one node (elastic maximum; per part of a gang with nodes): at most what a node has, which the nodes say when they register (a request no node could host waits with that reason)"
     },
     "min_gpus": {
      "type": "integer",
      "minimum": 0,
      "description": "elastic minimum"
     },
     "nodes": {
      "type": "integer",
      "minimum": 0,
      "maximum": 4096,
      "description": "a gang: this many parts, each on a node of its own with gpus whole GPUs (or none), all placed or none; every part starts with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the other launcher variables set"
     },
     "total_gpus": {
      "type": "integer",
      "minimum": 0,
      "maximum": 131072,
      "description": "a gang of this many GPUs in all: parts of as many GPUs as the largest node that could host one has (whole nodes first), then the remainder; not with gpus, min_gpus, gpu_milli, mig or nodes"
     },
     "gpu_milli": {
      "type": "integer",
      "minimum": 0,
      "maximum": 999,
      "description": "a share of one GPU"
     },
     "gpu_memory_mib": {
      "type": "integer",
      "minimum": 0
     },
     "gpu_models": {
      "type": "array",
      "items": {
       "type": "string"
      },
      "description": "allowed models (substring match)"
     },
     "mig": {
      "type": "string",
      "example": "1g.10gb"
     },
     "cpu_milli": {
      "type": "integer",
      "minimum": 1,
      "default": 1000
     },
     "memory_mib": {
      "type": "integer",
      "minimum": 0,
      "default": 512
     },
     "class": {
      "type": "string",
      "description": "job class for the weighted placement policy"
     },
     "priority": {
      "type": "integer",
      "minimum": -1000,
      "maximum": 1000
     },
     "preemptible": {
      "type": "boolean"
     },
     "movable": {
      "type": "boolean",
      "description": "checkpointable: the system may restart it at once to consolidate it onto a shared GPU"
     },
     "on_node_loss": {
      "type": "string",
      "enum": [
       "requeue",
       "fail"
      ]
     },
     "user": {
      "type": "string",
      "description": "admins only: submit for this user"
     }
    }
   },
   "Job": {
    "type": "object",
    "properties": {
     "id": {
      "type": "integer"
     },
     "user": {
      "type": "string"
     },
     "name": {
      "type": "string"
     },
     "state": {
      "type": "string",
      "enum": [
       "queued",
       "assigned",
       "running",
       "cancelling",
       "succeeded",
       "failed",
       "cancelled"
      ]
     },
     "spec": {
      "$ref": "#/components/schemas/JobSpec"
     },
     "assignment": {
      "type": "object",
      "description": "node, gpu_indices, gpu_milli, mig_uuid, cuda_visible_devices"
     },
     "parts": {
      "type": "array",
      "description": "a placed gang: every part in rank order, with the fields of an assignment (its env holds the launcher variables) and its run",
      "items": {
       "type": "object",
       "properties": {
        "rank": {
         "type": "integer"
        },
        "node": {
         "type": "string"
        },
        "phase": {
         "type": "string",
         "enum": [
          "assigned",
          "running",
          "exited",
          "lost"
         ]
        },
        "exit_code": {
         "type": "integer"
        },
        "signal": {
         "type": "integer"
        },
        "error": {
         "type": "string"
        }
       }
      }
     },
     "stop_to_fail": {
      "type": "string",
      "description": "while a gang is being stopped because one of its parts failed: the reason it will end failed with"
     },
     "exit_code": {
      "type": "integer"
     },
     "signal": {
      "type": "integer"
     },
     "reason": {
      "type": "string"
     },
     "submit_ms": {
      "type": "integer"
     },
     "start_ms": {
      "type": "integer"
     },
     "end_ms": {
      "type": "integer"
     },
     "requeues": {
      "type": "integer"
     },
     "preemptions": {
      "type": "integer",
      "description": "times this preemptible job was stopped and requeued for guaranteed work"
     },
     "preempted_by": {
      "type": "integer",
      "description": "while being preempted: the queued job it makes room for"
     },
     "stop_to_requeue": {
      "type": "string",
      "description": "while being stopped to go back to the queue (idle reclaim, consolidation): why"
     },
     "consolidate_milli": {
      "type": "integer",
      "description": "set by the consolidation plan: from its next start the job runs as this share of a GPU"
     }
    }
   },
   "Node": {
    "type": "object",
    "properties": {
     "name": {
      "type": "string"
     },
     "simulated": {
      "type": "boolean"
     },
     "source": {
      "type": "string"
     },
     "state": {
      "type": "string",
      "enum": [
       "ready",
       "drained",
       "lost"
      ]
     },
     "cpu_milli": {
      "type": "integer"
     },
     "memory_mib": {
      "type": "integer"
     },
     "gpus": {
      "type": "array",
      "items": {
       "type": "object",
       "properties": {
        "index": {
         "type": "integer"
        },
        "uuid": {
         "type": "string"
        },
        "model": {
         "type": "string"
        },
        "memory_mib": {
         "type": "integer"
        },
        "mig_enabled": {
         "type": "boolean"
        },
        "mig": {
         "type": "array",
         "items": {
          "type": "object"
         }
        }
       }
      }
     },
     "address": {
      "type": "string",
      "maxLength": 253,
      "description": "where the other parts of a gang reach this node (MASTER_ADDR when it runs rank 0); absent: its name"
     },
     "samples": {
      "type": "array",
      "items": {
       "type": "object"
      },
      "description": "latest GPU samples from the node's agent"
     }
    }
   },
   "Heartbeat": {
    "type": "object",
    "properties": {
     "jobs": {
      "type": "array",
      "items": {
       "type": "object",
       "properties": {
        "id": {
         "type": "integer"
        },
        "phase": {
         "type": "string",
         "enum": [
          "starting",
          "running",
          "exited"
         ]
        },
        "exit_code": {
         "type": "integer"
        },
        "signal": {
         "type": "integer"
        },
        "error": {
         "type": "string"
        },
        "stdout_offset": {
         "type": "integer"
        },
        "stdout_data": {
         "type": "string"
        },
        "stderr_offset": {
         "type": "integer"
        },
        "stderr_data": {
         "type": "string"
        },
        "logs_complete": {
         "type": "boolean"
        }
       }
      }
     },
     "samples": {
      "type": "array",
      "items": {
       "type": "object"
      }
     }
    }
   },
   "HeartbeatReply": {
    "type": "object",
    "properties": {
     "start": {
      "type": "array",
      "items": {
       "type": "object"
      }
     },
     "cancel": {
      "type": "array",
      "items": {
       "type": "integer"
      }
     },
     "cancel_grace_ms": {
      "type": "object",
      "description": "Per cancelled job id, milliseconds from SIGTERM to SIGKILL (preemptions); other cancels use the node's own grace",
      "additionalProperties": {
       "type": "integer",
       "minimum": 0
      }
     },
     "forget": {
      "type": "array",
      "items": {
       "type": "integer"
      }
     },
     "log_offsets": {
      "type": "object"
     }
    }
   }
  }
 },
 "paths": {
  "/health": {
   "get": {
    "summary": "Liveness",
    "tags": [
     "meta"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "security": []
   }
  },
  "/openapi.json": {
   "get": {
    "summary": "This document",
    "tags": [
     "meta"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "security": []
   }
  },
  "/whoami": {
   "get": {
    "summary": "The caller's name and role",
    "tags": [
     "meta"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   }
  },
  "/jobs": {
   "post": {
    "summary": "Submit a job (durable before the 201)",
    "tags": [
     "jobs"
    ],
    "responses": {
     "201": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Job"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/JobSpec"
       }
      }
     }
    }
   },
   "get": {
    "summary": "List jobs (users see only their own)",
    "tags": [
     "jobs"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "array",
         "items": {
          "$ref": "#/components/schemas/Job"
         }
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "parameters": [
     {
      "name": "state",
      "in": "query",
      "schema": {
       "type": "string"
      },
      "description": "comma-separated states"
     },
     {
      "name": "user",
      "in": "query",
      "schema": {
       "type": "string"
      }
     },
     {
      "name": "node",
      "in": "query",
      "schema": {
       "type": "string"
      }
     },
     {
      "name": "limit",
      "in": "query",
      "schema": {
       "type": "integer"
      }
     }
    ]
   }
  },
  "/jobs/{id}": {
   "get": {
    "summary": "Get a job",
    "tags": [
     "jobs"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Job"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "id",
     "in": "path",
     "required": true,
     "schema": {
      "type": "integer"
     }
    }
   ]
  },
  "/jobs/{id}/cancel": {
   "post": {
    "summary": "Cancel a job (SIGTERM to its process group, grace, SIGKILL)",
    "tags": [
     "jobs"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Job"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "id",
     "in": "path",
     "required": true,
     "schema": {
      "type": "integer"
     }
    }
   ]
  },
  "/jobs/{id}/logs": {
   "get": {
    "summary": "Read a job's output from an offset",
    "tags": [
     "jobs"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object",
         "properties": {
          "data": {
           "type": "string"
          },
          "next_offset": {
           "type": "integer"
          },
          "finished": {
           "type": "boolean"
          }
         }
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "id",
     "in": "path",
     "required": true,
     "schema": {
      "type": "integer"
     }
    },
    {
     "name": "stream",
     "in": "query",
     "schema": {
      "type": "string",
      "enum": [
       "stdout",
       "stderr"
      ]
     }
    },
    {
     "name": "offset",
     "in": "query",
     "schema": {
      "type": "integer"
     }
    }
   ]
  },
  "/jobs/{id}/events": {
   "get": {
    "summary": "A job's history",
    "tags": [
     "jobs"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "array",
         "items": {
          "type": "object"
         }
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "id",
     "in": "path",
     "required": true,
     "schema": {
      "type": "integer"
     }
    }
   ]
  },
  "/nodes": {
   "get": {
    "summary": "List nodes",
    "tags": [
     "nodes"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "array",
         "items": {
          "$ref": "#/components/schemas/Node"
         }
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   }
  },
  "/nodes/register": {
   "post": {
    "summary": "Register a node (its agent, or an admin)",
    "tags": [
     "nodes"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Node"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/Node"
       }
      }
     }
    }
   }
  },
  "/nodes/{name}": {
   "get": {
    "summary": "A node with its latest GPU samples",
    "tags": [
     "nodes"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Node"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "name",
     "in": "path",
     "required": true,
     "schema": {
      "type": "string"
     }
    }
   ]
  },
  "/nodes/{name}/heartbeat": {
   "post": {
    "summary": "Report samples and job states; receive jobs to start, cancel, forget",
    "tags": [
     "nodes"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/HeartbeatReply"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/Heartbeat"
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "name",
     "in": "path",
     "required": true,
     "schema": {
      "type": "string"
     }
    }
   ]
  },
  "/nodes/{name}/drain": {
   "post": {
    "summary": "Stop placing jobs on a node (admin)",
    "tags": [
     "nodes"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Node"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "name",
     "in": "path",
     "required": true,
     "schema": {
      "type": "string"
     }
    }
   ]
  },
  "/nodes/{name}/undrain": {
   "post": {
    "summary": "Resume placing jobs on a node (admin)",
    "tags": [
     "nodes"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Node"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "parameters": [
    {
     "name": "name",
     "in": "path",
     "required": true,
     "schema": {
      "type": "string"
     }
    }
   ]
  },
  "/allocations": {
   "get": {
    "summary": "Resources held by active jobs",
    "tags": [
     "scheduling"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "array",
         "items": {
          "type": "object"
         }
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   }
  },
  "/queue": {
   "get": {
    "summary": "Queued jobs in policy order, with the reason each waits",
    "tags": [
     "scheduling"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "array",
         "items": {
          "type": "object"
         }
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   }
  },
  "/policy": {
   "get": {
    "summary": "The scheduling policy",
    "tags": [
     "scheduling"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    }
   },
   "put": {
    "summary": "Change the scheduling policy (admin)",
    "tags": [
     "scheduling"
    ],
    "responses": {
     "200": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "type": "object",
        "properties": {
         "placement": {
          "type": "string"
         },
         "queue": {
          "type": "string"
         },
         "backfill": {
          "type": "boolean"
         }
        }
       }
      }
     }
    }
   }
  },
  "/tokens": {
   "post": {
    "summary": "Create a token (admin); it is returned once",
    "tags": [
     "auth"
    ],
    "responses": {
     "201": {
      "description": "success",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "400": {
      "description": "validation error naming the field",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "401": {
      "description": "missing or unknown token",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "403": {
      "description": "role not allowed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "404": {
      "description": "not found",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     },
     "409": {
      "description": "state conflict",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      }
     }
    },
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "type": "object",
        "required": [
         "role",
         "name"
        ],
        "properties": {
         "role": {
          "type": "string",
          "enum": [
           "admin",
           "agent",
           "user",
           "scheduler"
          ]
         },
         "name": {
          "type": "string"
         }
        }
       }
      }
     }
    }
   }
  }
 }
})openapi";
  return doc;
}

}  // namespace stoker::server
