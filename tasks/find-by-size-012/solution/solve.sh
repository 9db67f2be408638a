#!/bin/bash
find /app/marble -type f -size +3000c > /app/large.txt
