#!/bin/bash
find /app/raven -type f -name '*.log' > /app/olive_found.txt
