#!/bin/bash
cd /app && tar czf /app/warm-sage.tar.gz island/*.cfg
