#!/bin/bash
find /app/sage -type f -size +2000c > /app/large.txt
