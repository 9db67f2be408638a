#!/bin/bash
cd /app && tar czf /app/proud-wolf.tar.gz goblet/*.cfg
