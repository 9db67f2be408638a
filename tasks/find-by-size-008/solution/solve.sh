#!/bin/bash
find /app/cinder -type f -size +2000c > /app/large.txt
