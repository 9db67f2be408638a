#!/bin/bash
find /app/willow -type f -name '*.md' > /app/found.txt
