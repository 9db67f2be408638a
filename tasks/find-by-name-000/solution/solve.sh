#!/bin/bash
find /app/raven -type f -name '*.log' > /app/found.txt
